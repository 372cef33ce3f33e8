// Label smoothing and the DFT loss (kernels/token_loss.hpp) in the CUDA fused LM head + cross-entropy
// against the CPU backend (whose kernel tests/unit/test_cpu_token_loss.cpp checks against transformers'
// formulas and finite differences): loss, metrics and gradients, fp32 and bf16, with and without the
// logit softcap, and the plain loss unchanged by a plain TokenLoss. The vocab-parallel pieces (tp > 1,
// kernels/cuda/vocab_parallel_cross_entropy.cu) on 2 and 3 vocabulary slices, combined as the decoder's
// all-reduces do, against the CPU backend's pieces (tests/unit/test_cpu_vocab_parallel_cross_entropy.cpp
// checks those against the fused kernel) and against the GPU's fused loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

// The decoder's vocab-parallel sequence (src/model/decoder_tensor_parallel.cpp) on one backend, with the
// all-reduces done by host loops over the slices: the summed loss and each slice's dlogits (tp, M, Vl).
struct SplitLoss {
  double loss = 0;
  std::vector<std::vector<float>> dlogits;
};
SplitLoss split_loss(Ops& ops, const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                     const std::vector<int32_t>& y, int64_t V, int tp, float grad_scale, float cap,
                     const TokenLoss& loss) {
  const int64_t M = hidden.dim(0), C = hidden.dim(1), Vl = V / tp;
  std::vector<Tensor> z;  // (tp) each (M, Vl)
  std::vector<float> m(static_cast<size_t>(M), -INFINITY), sums(static_cast<size_t>(2 * M), 0.0f),
      logit_sums(static_cast<size_t>(M), 0.0f);
  for (int r = 0; r < tp; ++r) {
    z.push_back(ops.allocate({M, Vl}));
    ops.matmul(hidden, false, weight.view({Vl, C}, r * Vl * C), true, z.back());
    if (cap > 0) ops.logit_softcap(z.back(), cap);
    const Tensor mr = ops.allocate({M});
    ops.vocab_parallel_ce_max(z.back(), mr);
    const std::vector<float> local = download(ops, mr);
    for (int64_t t = 0; t < M; ++t) m[t] = std::max(m[t], local[t]);  // all-reduce max
  }
  const Tensor m_all = upload(ops, m, {M});
  for (int r = 0; r < tp; ++r) {
    const Tensor sr = ops.allocate({M, 2}), lr = ops.allocate({M});
    ops.vocab_parallel_ce_sums(z[r], targets, r * Vl, m_all, sr);
    const std::vector<float> local = download(ops, sr);
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += local[i];  // all-reduce sum
    if (loss.label_smoothing > 0) {
      ops.vocab_parallel_ce_logit_sums(z[r], targets, lr);
      const std::vector<float> l = download(ops, lr);
      for (int64_t t = 0; t < M; ++t) logit_sums[t] += l[t];  // all-reduce sum
    }
  }
  SplitLoss out;
  for (int64_t t = 0; t < M; ++t)
    if (y[t] != -100)
      out.loss += token_loss_from_statistics(m[t] + std::log(static_cast<double>(sums[2 * t])), sums[2 * t + 1],
                                             static_cast<double>(logit_sums[t]) / V, loss);
  const Tensor sums_all = upload(ops, sums, {M, 2});
  for (int r = 0; r < tp; ++r) {
    ops.vocab_parallel_ce_shaped_grad(z[r], targets, r * Vl, V, m_all, sums_all, grad_scale, cap, loss);
    out.dlogits.push_back(download(ops, z[r]));
  }
  return out;
}

// Label smoothing 0.1, DFT, and both, with and without the softcap (3), on 2 and 3 slices of V 3000:
// each slice's GPU dlogits against the CPU backend's within kF32Tolerance (normalised: fp32 __expf
// against the CPU's double exp, the same bound as the plain pieces in test_cross_entropy.cpp), the
// split loss against the CPU split within 1e-5 relative and against the GPU fused loss within 1e-5
// relative (as the fused comparison above).
TEST(CudaTokenLoss, VocabParallelSmoothedAndDftPiecesMatchCpuAndTheFusedLoss) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t N = 67, C = 32, V = 3000;
  const std::vector<int32_t> y = random_targets(N, V, 51);
  const Pair hidden = both(be, random_floats(static_cast<size_t>(N * C), 52, 2.0f), {N, C});
  const Pair weight = both(be, random_floats(static_cast<size_t>(V * C), 53), {V, C});
  const Pair targets = both_i32(be, y, {N});
  for (const TokenLoss loss : {TokenLoss{0.1f, false}, TokenLoss{0.0f, true}, TokenLoss{0.3f, true}})
    for (const float cap : {0.0f, 3.0f}) {
      int64_t valid = 0;
      const double fused = be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, 0.01f, Tensor(),
                                                         Tensor(), 64, &valid, nullptr, nullptr, cap, loss);
      for (int tp : {2, 3}) {
        SCOPED_TRACE(::testing::Message() << "eps " << loss.label_smoothing << " dft " << loss.dft << " cap " << cap
                                          << " tp " << tp);
        const SplitLoss gpu = split_loss(*be.gpu, hidden.gpu, weight.gpu, targets.gpu, y, V, tp, 0.01f, cap, loss);
        const SplitLoss cpu = split_loss(*be.cpu, hidden.cpu, weight.cpu, targets.cpu, y, V, tp, 0.01f, cap, loss);
        EXPECT_NEAR(gpu.loss, cpu.loss, 1e-5 * std::fabs(cpu.loss));
        EXPECT_NEAR(gpu.loss, fused, 1e-5 * std::fabs(fused));
        for (int r = 0; r < tp; ++r)
          EXPECT_TRUE(close_normalized(gpu.dlogits[r], cpu.dlogits[r], kF32Tolerance)) << "slice " << r;
      }
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
