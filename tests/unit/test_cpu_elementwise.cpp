// Tests of kernels/cpu/elementwise.cpp against double references, on odd sizes around the OpenMP and
// vector widths, plus thread-count independence of sum_of_squares (it feeds the gradient norm).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

TEST(CpuElementwise, AddAndScale) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 7, 33, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> y = random_floats(n, 1);
    const std::vector<float> x = random_floats(n, 2);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = static_cast<double>(y[i]) + x[i];
    trlhpc::cpu::add_inplace(y.data(), x.data(), n);
    EXPECT_TRUE(all_close(y, want, 1e-7, 0));  // one fp32 rounding
    for (int64_t i = 0; i < n; ++i) want[i] = static_cast<double>(y[i]) * -0.375;
    trlhpc::cpu::scale_inplace(y.data(), -0.375f, n);
    EXPECT_TRUE(all_close(y, want, 1e-7, 0));  // one fp32 rounding
  }
}

TEST(CpuElementwise, SumOfSquaresInDouble) {
  omp_set_num_threads(2);
  for (int64_t n : {0, 1, 7, 33, 16384, 16385, 1000001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> x = random_floats(n, 3, 2.0f);
    long double want = 0;
    for (float v : x) want += static_cast<long double>(v) * v;
    const double got = trlhpc::cpu::sum_of_squares(x.data(), n);
    // Summed in double: relative error ~n * 1e-16 at worst.
    EXPECT_NEAR(got, static_cast<double>(want), 1e-12 * static_cast<double>(want) + 1e-300);
  }
}

TEST(CpuElementwise, SumOfSquaresDoesNotDependOnThreadCount) {
  const std::vector<float> x = random_floats(1000003, 4);
  omp_set_num_threads(1);
  const double one = trlhpc::cpu::sum_of_squares(x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(3);
  const double three = trlhpc::cpu::sum_of_squares(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(one, three);
}

}  // namespace
