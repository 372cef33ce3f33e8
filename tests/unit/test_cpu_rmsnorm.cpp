// Tests of kernels/cpu/rmsnorm.cpp against a naive double reference: forward y and rstd, backward dx
// (overwrite) and dweight (accumulate) against central finite differences of L = sum(y * dy) taken in
// double through the reference, and thread-count independence of dweight.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// y (N, C) and rstd (N) in double.
void reference(const std::vector<double>& x, const std::vector<double>& w, int64_t N, int64_t C, double eps,
               std::vector<double>& y, std::vector<double>& rstd) {
  y.assign(N * C, 0.0), rstd.assign(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += x[n * C + c] * x[n * C + c];
    rstd[n] = 1.0 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c) y[n * C + c] = x[n * C + c] * rstd[n] * w[c];
  }
}

struct Case {
  int64_t N, C;
};

TEST(CpuRmsnorm, ForwardMatchesDoubleReference) {
  omp_set_num_threads(2);
  for (Case cs : {Case{1, 1}, Case{7, 8}, Case{33, 33}, Case{5, 1000}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << cs.N << " C=" << cs.C);
    const std::vector<float> x = random_floats(cs.N * cs.C, 1, 3.0f), w = random_floats(cs.C, 2);
    std::vector<float> y(x.size(), kNaN), rstd(cs.N, kNaN);
    trlhpc::cpu::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), cs.N, cs.C, 1e-6f);
    std::vector<double> y_want, rstd_want;
    reference({x.begin(), x.end()}, {w.begin(), w.end()}, cs.N, cs.C, 1e-6, y_want, rstd_want);
    // rstd from a double sum is exact to one fp32 rounding; y adds two more roundings.
    EXPECT_TRUE(all_close(rstd, rstd_want, 1e-6, 0)) << "rstd";
    EXPECT_TRUE(all_close(y, y_want, 1e-5, 1e-7)) << "y";
  }
}

// Central differences of L = sum(y * dy) in double, step 1e-5 on O(1) inputs: truncation ~h^2 = 1e-10,
// rounding ~1e-16 |L| / h ~ 1e-10, so the FD gradient is exact to ~1e-9 and the 1e-5 tolerance only
// covers the fp32 kernel (a few roundings per term, sums over C <= 40 in double/fp32).
TEST(CpuRmsnorm, BackwardMatchesFiniteDifferences) {
  omp_set_num_threads(2);
  for (Case cs : {Case{1, 1}, Case{7, 8}, Case{33, 40}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << cs.N << " C=" << cs.C);
    const int64_t N = cs.N, C = cs.C;
    const double eps = 1e-5;
    const std::vector<float> xf = random_floats(N * C, 3), wf = random_floats(C, 4), dy = random_floats(N * C, 5);
    std::vector<double> x(xf.begin(), xf.end()), w(wf.begin(), wf.end());
    auto loss = [&]() {
      std::vector<double> y, rstd;
      reference(x, w, N, C, eps, y, rstd);
      double l = 0;
      for (int64_t i = 0; i < N * C; ++i) l += y[i] * dy[i];
      return l;
    };
    auto fd = [&](std::vector<double>& v) {
      std::vector<double> g(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        const double h = 1e-5, v0 = v[i];
        v[i] = v0 + h;
        const double up = loss();
        v[i] = v0 - h;
        g[i] = (up - loss()) / (2 * h);
        v[i] = v0;
      }
      return g;
    };
    const std::vector<double> dx_want = fd(x);
    std::vector<double> dw_want = fd(w);
    std::vector<float> y(N * C), rstd(N), dx(N * C, kNaN), dw = random_floats(C, 6);  // dw accumulates
    for (int64_t c = 0; c < C; ++c) dw_want[c] += dw[c];
    trlhpc::cpu::rmsnorm_fwd(xf.data(), wf.data(), y.data(), rstd.data(), N, C, static_cast<float>(eps));
    trlhpc::cpu::rmsnorm_bwd(xf.data(), wf.data(), rstd.data(), dy.data(), dx.data(), dw.data(), N, C);
    EXPECT_TRUE(all_close(dx, dx_want, 1e-5, 1e-5)) << "dx";
    EXPECT_TRUE(all_close(dw, dw_want, 1e-5, 1e-5)) << "dweight";
  }
}

TEST(CpuRmsnorm, WeightGradientDoesNotDependOnThreadCount) {
  const int64_t N = 1001, C = 200;
  const std::vector<float> x = random_floats(N * C, 7), w = random_floats(C, 8), dy = random_floats(N * C, 9);
  std::vector<float> y(N * C), rstd(N), dx(N * C);
  trlhpc::cpu::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), N, C, 1e-6f);
  std::vector<float> one(C, 0.0f), three(C, 0.0f);
  omp_set_num_threads(1);
  trlhpc::cpu::rmsnorm_bwd(x.data(), w.data(), rstd.data(), dy.data(), dx.data(), one.data(), N, C);
  omp_set_num_threads(3);
  trlhpc::cpu::rmsnorm_bwd(x.data(), w.data(), rstd.data(), dy.data(), dx.data(), three.data(), N, C);
  EXPECT_EQ(one, three);
}

}  // namespace
