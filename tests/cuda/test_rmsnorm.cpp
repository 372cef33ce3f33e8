// CUDA RMSNorm forward/backward against the CPU backend, fp32 and the mixed dtypes the bf16 design
// uses (fp32 residual in, bf16 out; bf16 gradients), odd widths and row counts.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

TEST(CudaRmsNorm, ForwardAndBackwardMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  struct Dtypes {
    DType x, y_or_grad;
  };
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {37, 29}, {300, 896}, {5, 4097}})
    for (Dtypes d : {Dtypes{DType::F32, DType::F32}, {DType::F32, DType::BF16}, {DType::BF16, DType::BF16}}) {
      const float eps = 1e-6f;
      const Pair x = both(be, random_floats(static_cast<size_t>(N * C), 1, 2.0f), {N, C}, d.x);
      const Pair w = both(be, random_floats(static_cast<size_t>(C), 2), {C});
      const Pair y = both_poisoned(be, {N, C}, d.y_or_grad), rstd = both_poisoned(be, {N});
      be.cpu->rmsnorm_fwd(x.cpu, w.cpu, y.cpu, rstd.cpu, eps);
      be.gpu->rmsnorm_fwd(x.gpu, w.gpu, y.gpu, rstd.gpu, eps);
      const double tol = d.x == DType::BF16 || d.y_or_grad == DType::BF16 ? kBf16Tolerance : kF32Tolerance;
      EXPECT_TRUE(matches(be, y, tol)) << "y N " << N << " C " << C;
      EXPECT_TRUE(matches(be, rstd, kF32Tolerance)) << "rstd N " << N << " C " << C;

      const Pair dy = both(be, random_floats(static_cast<size_t>(N * C), 3), {N, C}, d.y_or_grad);
      const Pair dx = both_poisoned(be, {N, C}, d.y_or_grad);
      const Pair dw = both(be, random_floats(static_cast<size_t>(C), 4), {C});  // accumulates
      be.cpu->rmsnorm_bwd(x.cpu, w.cpu, rstd.cpu, dy.cpu, dx.cpu, dw.cpu);
      be.gpu->rmsnorm_bwd(x.gpu, w.gpu, rstd.gpu, dy.gpu, dx.gpu, dw.gpu);
      EXPECT_TRUE(matches(be, dx, tol)) << "dx N " << N << " C " << C;
      EXPECT_TRUE(matches(be, dw, kF32Tolerance)) << "dweight N " << N << " C " << C;
    }
}

}  // namespace
}  // namespace trlhpc::cuda_test
