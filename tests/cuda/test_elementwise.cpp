// CUDA elementwise ops, the global-norm reduction and the fp32 <-> bf16 casts against the CPU backend
// and the host math of include/trlhpc/kernels/elementwise_math.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cuda_test_util.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

TEST(CudaElementwise, AddInplaceAllDtypeCombinations) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (auto [ty, tx] : {std::pair{DType::F32, DType::F32}, {DType::BF16, DType::BF16}, {DType::F32, DType::BF16}})
    for (int64_t n : {1, 1000, 1 << 20}) {
      const Pair y = both(be, random_floats(static_cast<size_t>(n), 1), {n}, ty);
      const Pair x = both(be, random_floats(static_cast<size_t>(n), 2), {n}, tx);
      be.cpu->add_inplace(y.cpu, x.cpu);
      be.gpu->add_inplace(y.gpu, x.gpu);
      EXPECT_TRUE(matches(be, y, ty == DType::BF16 ? kBf16Tolerance : 1e-7)) << n;
    }
}

TEST(CudaElementwise, ScaleInplace) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Pair y = both(be, random_floats(4099, 3), {4099}, dtype);
    be.cpu->scale_inplace(y.cpu, -0.37f);
    be.gpu->scale_inplace(y.gpu, -0.37f);
    EXPECT_TRUE(matches(be, y, dtype == DType::BF16 ? kBf16Tolerance : 0.0));
  }
}

TEST(CudaElementwise, SumOfSquaresIsExactAndReproducible) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (int64_t n : {0, 1, 255, 257, 1000003}) {
    const Pair x = both(be, random_floats(static_cast<size_t>(n), 4, 3.0f), {n});
    const double want = be.cpu->sum_of_squares(x.cpu), got = be.gpu->sum_of_squares(x.gpu);
    EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, want)) << n;
    EXPECT_EQ(got, be.gpu->sum_of_squares(x.gpu)) << "two runs differ, n " << n;
  }
  const Pair xb = both(be, random_floats(5000, 5), {5000}, DType::BF16);
  const double want_b = be.cpu->sum_of_squares(xb.cpu);
  EXPECT_NEAR(be.gpu->sum_of_squares(xb.gpu), want_b, 1e-12 * want_b);
}

TEST(CudaElementwise, CastsRoundToNearestEvenLikeTheHost) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  std::vector<float> values = random_floats(100000, 6, 1e3f);
  for (float x : {0.0f, -0.0f, 1.00390625f, 1.01171875f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max()})
    values.push_back(x);
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor f32 = upload(*be.gpu, values, {n});
  Tensor b16 = poisoned(*be.gpu, {n}, DType::BF16);
  be.gpu->cast(b16, f32);
  const std::vector<float> got = download(*be.gpu, b16);
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(math::float_bits(got[i]), math::float_bits(math::round_to_bf16(values[i]))) << "value " << values[i];
  Tensor back = poisoned(*be.gpu, {n});
  be.gpu->cast(back, b16);
  EXPECT_TRUE(close_normalized(download(*be.gpu, back), got, 0.0));
}

}  // namespace
}  // namespace trlhpc::cuda_test
