// Label smoothing and the DFT loss (kernels/token_loss.hpp) in the CUDA fused LM head + cross-entropy
// against the CPU backend (whose kernel tests/unit/test_cpu_token_loss.cpp checks against transformers'
// formulas and finite differences): loss, metrics and gradients, fp32 and bf16, with and without the
// logit softcap, and the plain loss unchanged by a plain TokenLoss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

std::vector<int32_t> random_targets(int64_t N, int64_t V, uint64_t seed) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (auto& y : t) y = gen() % 3 == 0 ? -100 : static_cast<int32_t>(gen() % V);
  return t;
}

TEST(CudaTokenLoss, SmoothedAndDftLossesMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (const TokenLoss loss : {TokenLoss{0.1f, false}, TokenLoss{0.0f, true}, TokenLoss{0.3f, true}})
    for (const float cap : {0.0f, 3.0f})
      for (DType dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(::testing::Message() << "eps " << loss.label_smoothing << " dft " << loss.dft << " cap " << cap
                                          << " " << dtype_name(dtype));
        const int64_t N = 150, C = 64, V = 2003;
        const Pair hidden = both(be, random_floats(static_cast<size_t>(N * C), 31, 2.0f), {N, C}, dtype);
        const Pair weight = both(be, random_floats(static_cast<size_t>(V * C), 32), {V, C}, dtype);
        const Pair targets = both_i32(be, random_targets(N, V, 33), {N});
        const Pair dhidden = both_poisoned(be, {N, C}, DType::F32);
        const Pair dweight = both(be, std::vector<float>(static_cast<size_t>(V * C), 0.0f), {V, C});
        int64_t valid_cpu = -1, valid_gpu = -2;
        TokenMetrics m_cpu, m_gpu;
        const double loss_cpu = be.cpu->cross_entropy_fwd_bwd(hidden.cpu, weight.cpu, targets.cpu, 0.01f, dhidden.cpu,
                                                              dweight.cpu, 64, &valid_cpu, &m_cpu, nullptr, cap, loss);
        const double loss_gpu = be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, 0.01f, dhidden.gpu,
                                                              dweight.gpu, 64, &valid_gpu, &m_gpu, nullptr, cap, loss);
        EXPECT_EQ(valid_gpu, valid_cpu);
        EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * std::fabs(loss_cpu));
        EXPECT_NEAR(m_gpu.entropy_sum, m_cpu.entropy_sum, 1e-5 * m_cpu.entropy_sum);
        EXPECT_EQ(m_gpu.top1, m_cpu.top1);
        const double tol = dtype == DType::BF16 ? kBf16Tolerance : kF32Tolerance;
        EXPECT_TRUE(matches(be, dhidden, tol)) << "dhidden";
        EXPECT_TRUE(matches(be, dweight, tol)) << "dweight";
      }
}

TEST(CudaTokenLoss, PlainTokenLossIsTheDefaultBitForBit) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t N = 40, C = 32, V = 517;
  const Tensor hidden = upload(*be.gpu, random_floats(static_cast<size_t>(N * C), 41, 2.0f), {N, C});
  const Tensor weight = upload(*be.gpu, random_floats(static_cast<size_t>(V * C), 42), {V, C});
  const Tensor targets = upload_i32(*be.gpu, random_targets(N, V, 43), {N});
  int64_t valid = 0;
  const double a = be.gpu->cross_entropy_fwd_bwd(hidden, weight, targets, 1.0f, Tensor(), Tensor(), 16, &valid);
  const double b = be.gpu->cross_entropy_fwd_bwd(hidden, weight, targets, 1.0f, Tensor(), Tensor(), 16, &valid,
                                                 nullptr, nullptr, 0.0f, TokenLoss{});
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace trlhpc::cuda_test
