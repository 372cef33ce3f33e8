// CUDA fused LM head + cross-entropy against the CPU backend: ignored targets, chunk sizes that do
// and do not divide the valid tokens, forward only, fp32 and bf16 hidden/weight, fp32 and bf16
// dhidden (dweight accumulates in fp32), no valid token at all, and a bad target; TRL's entropy and
// top-1 metrics of the fused and the vocab-parallel loss (ties resolved to the first index, as on the CPU);
// the targets' host copy instead of a copy back and the deferred loss that does not wait (docs/CUDA-REVIEW-FIXES.md
// defect 6); Gemma 2's final-logit softcap in the fused loss, the vocab-parallel gradient and the
// logit_softcap op.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <cuda_runtime.h>

#include "cuda_test_util.hpp"
#include "trlhpc/core/cuda_check.hpp"
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

TEST(CudaCrossEntropy, LossAndGradientsMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  struct Case {
    int64_t N, C, V, chunk;
    DType dtype, dhidden;
  };
  for (const Case& cs : {Case{37, 24, 1000, 7, DType::F32, DType::F32}, Case{37, 24, 1000, 1000, DType::F32, DType::F32},
                         Case{300, 64, 5003, 128, DType::F32, DType::F32},
                         Case{300, 64, 5003, 128, DType::BF16, DType::F32},
                         Case{300, 64, 5003, 100, DType::BF16, DType::BF16}}) {
    const Pair hidden = both(be, random_floats(static_cast<size_t>(cs.N * cs.C), 1, 2.0f), {cs.N, cs.C}, cs.dtype);
    const Pair weight = both(be, random_floats(static_cast<size_t>(cs.V * cs.C), 2), {cs.V, cs.C}, cs.dtype);
    const Pair targets = both_i32(be, random_targets(cs.N, cs.V, 3), {cs.N});
    const float scale = 1.0f / 250.0f;
    const Pair dhidden = both_poisoned(be, {cs.N, cs.C}, cs.dhidden);
    const Pair dweight = both(be, random_floats(static_cast<size_t>(cs.V * cs.C), 4), {cs.V, cs.C});  // accumulates
    int64_t valid_cpu = -1, valid_gpu = -2;
    const double loss_cpu = be.cpu->cross_entropy_fwd_bwd(hidden.cpu, weight.cpu, targets.cpu, scale, dhidden.cpu,
                                                          dweight.cpu, cs.chunk, &valid_cpu);
    const double loss_gpu = be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, scale, dhidden.gpu,
                                                          dweight.gpu, cs.chunk, &valid_gpu);
    const std::string where = "N " + std::to_string(cs.N) + " V " + std::to_string(cs.V) + " chunk " +
                              std::to_string(cs.chunk) + " " + dtype_name(cs.dtype);
    EXPECT_EQ(valid_gpu, valid_cpu) << where;
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * std::fabs(loss_cpu)) << where;
    const double tol = cs.dtype == DType::BF16 || cs.dhidden == DType::BF16 ? kBf16Tolerance : kF32Tolerance;
    EXPECT_TRUE(matches(be, dhidden, tol)) << "dhidden, " << where;
    EXPECT_TRUE(matches(be, dweight, tol)) << "dweight, " << where;

    // Forward only gives the same loss and touches no gradient.
    int64_t valid = 0;
    const double loss_fwd = be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, scale, Tensor(),
                                                          Tensor(), cs.chunk, &valid);
    EXPECT_NEAR(loss_fwd, loss_gpu, 1e-9 * std::fabs(loss_gpu)) << where;
    EXPECT_EQ(valid, valid_cpu);
  }
}

// Bounds: the GPU's logits come from cuBLAS, the CPU's from trlhpc's GEMM: equal to ~1e-6 relative in
// fp32 (the loss test's 1e-5 holds), so the summed entropy does too; a top-1 hit can only change on a
// near-tie closer than that, which random logits of this spread do not have (equal counts). bf16
// operands round both sides alike (the GEMMs accumulate in fp32): 1e-3 on the entropy, at most one hit.
TEST(CudaCrossEntropy, TrlMetricsMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (DType dtype : {DType::F32, DType::BF16}) {
    const int64_t N = 300, C = 64, V = 5003;
    const Pair hidden = both(be, random_floats(static_cast<size_t>(N * C), 1, 2.0f), {N, C}, dtype);
    const Pair weight = both(be, random_floats(static_cast<size_t>(V * C), 2), {V, C}, dtype);
    const Pair targets = both_i32(be, random_targets(N, V, 3), {N});
    TokenMetrics cpu, gpu;
    int64_t valid = 0;
    be.cpu->cross_entropy_fwd_bwd(hidden.cpu, weight.cpu, targets.cpu, 1.0f, Tensor(), Tensor(), 64, &valid, &cpu);
    be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, 1.0f, Tensor(), Tensor(), 64, &valid, &gpu);
    ASSERT_TRUE(cpu.computed);
    EXPECT_TRUE(gpu.computed) << dtype_name(dtype);
    const bool bf16 = dtype == DType::BF16;
    EXPECT_NEAR(gpu.entropy_sum, cpu.entropy_sum, (bf16 ? 1e-3 : 1e-5) * std::fabs(cpu.entropy_sum)) << dtype_name(dtype);
    EXPECT_LE(std::llabs(gpu.top1 - cpu.top1), bf16 ? 1 : 0) << dtype_name(dtype);
    // A model that predicts every target: top-1 must count them all (a kernel that never hits fails here).
    std::vector<float> one_hot(static_cast<size_t>(N * C), 0.0f), rows(static_cast<size_t>(V * C), 0.0f);
    for (int64_t v = 0; v < std::min(V, C); ++v) rows[static_cast<size_t>(v * C + v)] = 1.0f;
    std::vector<int32_t> t(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) {
      t[static_cast<size_t>(n)] = static_cast<int32_t>(n % C);
      one_hot[static_cast<size_t>(n * C + n % C)] = 8.0f;
    }
    const Pair h1 = both(be, one_hot, {N, C}, dtype), w1 = both(be, rows, {V, C}, dtype);
    const Pair y1 = both_i32(be, t, {N});
    be.gpu->cross_entropy_fwd_bwd(h1.gpu, w1.gpu, y1.gpu, 1.0f, Tensor(), Tensor(), 64, &valid, &gpu);
    EXPECT_EQ(gpu.top1, N) << dtype_name(dtype);
  }
}

TEST(CudaCrossEntropy, NoValidTargetAndBadTarget) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t N = 5, C = 8, V = 11;
  const Tensor hidden = upload(*be.gpu, random_floats(N * C, 1), {N, C});
  const Tensor weight = upload(*be.gpu, random_floats(V * C, 2), {V, C});
  const Tensor dweight = upload(*be.gpu, std::vector<float>(V * C, 0.0f), {V, C});
  Tensor dhidden = poisoned(*be.gpu, {N, C});
  int64_t valid = -1;
  const Tensor ignored = upload_i32(*be.gpu, std::vector<int32_t>(N, -100), {N});
  EXPECT_EQ(be.gpu->cross_entropy_fwd_bwd(hidden, weight, ignored, 1.0f, dhidden, dweight, 4, &valid), 0.0);
  EXPECT_EQ(valid, 0);
  EXPECT_TRUE(close_normalized(download(*be.gpu, dhidden), std::vector<float>(N * C, 0.0f), 0.0));
  const Tensor bad = upload_i32(*be.gpu, {1, 2, 11, 3, -100}, {N});
  EXPECT_THROW(be.gpu->cross_entropy_fwd_bwd(hidden, weight, bad, 1.0f, dhidden, dweight, 4, &valid), UserError);
}

TEST(CudaCrossEntropy, VocabParallelPiecesMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t M = 67, V = 1003, vocab_start = 500;  // this rank holds ids [500, 1503) of 3000
  std::vector<int32_t> t = random_targets(M, 3000, 8);
  const Pair targets = both_i32(be, t, {M});
  const Pair logits = both(be, random_floats(static_cast<size_t>(M * V), 9, 8.0f), {M, V});
  const Pair row_max = both_poisoned(be, {M}), sums = both_poisoned(be, {M, 2});
  be.cpu->vocab_parallel_ce_max(logits.cpu, row_max.cpu);
  be.gpu->vocab_parallel_ce_max(logits.gpu, row_max.gpu);
  EXPECT_TRUE(matches(be, row_max, 0.0));
  be.cpu->vocab_parallel_ce_sums(logits.cpu, targets.cpu, vocab_start, row_max.cpu, sums.cpu);
  be.gpu->vocab_parallel_ce_sums(logits.gpu, targets.gpu, vocab_start, row_max.gpu, sums.gpu);
  EXPECT_TRUE(matches(be, sums, kF32Tolerance));
  // TRL's metrics pieces: (sum exp(z - m)(z - m), first global id of the maximum). Row 0 has its maximum
  // twice (local 5 and 9): the first, global id 505, must win on both backends.
  const Pair stats = both_poisoned(be, {M, 2});
  be.cpu->vocab_parallel_ce_metrics(logits.cpu, targets.cpu, vocab_start, 3000, row_max.cpu, stats.cpu);
  ASSERT_TRUE(be.gpu->vocab_parallel_ce_metrics(logits.gpu, targets.gpu, vocab_start, 3000, row_max.gpu, stats.gpu));
  EXPECT_TRUE(matches(be, stats, kF32Tolerance));
  {
    std::vector<float> tie = random_floats(static_cast<size_t>(V), 10, 8.0f);
    tie[5] = tie[9] = 100.0f;
    const Pair row = both(be, tie, {1, V});
    const Pair m1 = both_poisoned(be, {1}), st1 = both_poisoned(be, {1, 2});
    const Pair y1 = both_i32(be, {505}, {1});
    be.gpu->vocab_parallel_ce_max(row.gpu, m1.gpu);
    be.gpu->vocab_parallel_ce_metrics(row.gpu, y1.gpu, vocab_start, 3000, m1.gpu, st1.gpu);
    EXPECT_EQ(download(*be.gpu, st1.gpu)[1], 505.0f);
  }
  be.cpu->vocab_parallel_ce_grad(logits.cpu, targets.cpu, vocab_start, row_max.cpu, sums.cpu, 0.01f);
  be.gpu->vocab_parallel_ce_grad(logits.gpu, targets.gpu, vocab_start, row_max.gpu, sums.gpu, 0.01f);
  EXPECT_TRUE(matches(be, logits, kF32Tolerance));
}

// Softcapped logits (cap 3 on logits of standard deviation ~4: most of them where tanh bends): the fused
// loss with its metrics and gradients, the logits op, and the vocab-parallel pieces on capped logits with
// the cap's derivative in the gradient, all against the CPU backend.
TEST(CudaCrossEntropy, SoftcappedLogitsMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const float cap = 3.0f;
  for (DType dtype : {DType::F32, DType::BF16}) {
    const int64_t N = 200, C = 64, V = 3001;
    const Pair hidden = both(be, random_floats(static_cast<size_t>(N * C), 21, 2.0f), {N, C}, dtype);
    const Pair weight = both(be, random_floats(static_cast<size_t>(V * C), 22), {V, C}, dtype);
    const Pair targets = both_i32(be, random_targets(N, V, 23), {N});
    const Pair dhidden = both_poisoned(be, {N, C}, DType::F32);
    const Pair dweight = both(be, std::vector<float>(static_cast<size_t>(V * C), 0.0f), {V, C});
    int64_t valid_cpu = -1, valid_gpu = -2;
    TokenMetrics m_cpu, m_gpu;
    const double loss_cpu = be.cpu->cross_entropy_fwd_bwd(hidden.cpu, weight.cpu, targets.cpu, 0.01f, dhidden.cpu,
                                                          dweight.cpu, 64, &valid_cpu, &m_cpu, nullptr, cap);
    const double loss_gpu = be.gpu->cross_entropy_fwd_bwd(hidden.gpu, weight.gpu, targets.gpu, 0.01f, dhidden.gpu,
                                                          dweight.gpu, 64, &valid_gpu, &m_gpu, nullptr, cap);
    EXPECT_EQ(valid_gpu, valid_cpu);
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * std::fabs(loss_cpu)) << dtype_name(dtype);
    EXPECT_NEAR(m_gpu.entropy_sum, m_cpu.entropy_sum, 1e-5 * m_cpu.entropy_sum) << dtype_name(dtype);
    EXPECT_EQ(m_gpu.top1, m_cpu.top1) << dtype_name(dtype);
    const double tol = dtype == DType::BF16 ? kBf16Tolerance : kF32Tolerance;
    EXPECT_TRUE(matches(be, dhidden, tol)) << "dhidden, " << dtype_name(dtype);
    EXPECT_TRUE(matches(be, dweight, tol)) << "dweight, " << dtype_name(dtype);
  }
  const int64_t M = 67, V = 1003, vocab_start = 500;
  const Pair targets = both_i32(be, random_targets(M, 3000, 24), {M});
  const Pair logits = both(be, random_floats(static_cast<size_t>(M * V), 25, 8.0f), {M, V});
  be.cpu->logit_softcap(logits.cpu, cap);
  be.gpu->logit_softcap(logits.gpu, cap);
  EXPECT_TRUE(matches(be, logits, kF32Tolerance)) << "logit_softcap";
  const Pair row_max = both_poisoned(be, {M}), sums = both_poisoned(be, {M, 2});
  be.cpu->vocab_parallel_ce_max(logits.cpu, row_max.cpu);
  be.gpu->vocab_parallel_ce_max(logits.gpu, row_max.gpu);
  be.cpu->vocab_parallel_ce_sums(logits.cpu, targets.cpu, vocab_start, row_max.cpu, sums.cpu);
  be.gpu->vocab_parallel_ce_sums(logits.gpu, targets.gpu, vocab_start, row_max.gpu, sums.gpu);
  be.cpu->vocab_parallel_ce_grad(logits.cpu, targets.cpu, vocab_start, row_max.cpu, sums.cpu, 0.01f, cap);
  be.gpu->vocab_parallel_ce_grad(logits.gpu, targets.gpu, vocab_start, row_max.gpu, sums.gpu, 0.01f, cap);
  EXPECT_TRUE(matches(be, logits, kF32Tolerance)) << "vocab-parallel dlogits through the cap";
}

// docs/CUDA-REVIEW-FIXES.md defect 6: with the targets' host copy (the decoder keeps the batch it uploaded) the
// call does not copy them back, and the valid rows are compacted on the device. Everything must be
// bitwise what the copying path gives, for several thousand tokens (more than the compaction block's
// 1024 threads, so slices hold several tokens), ignored tokens interleaved, and a bad host target
// must still be refused.
// A fused-loss problem on the GPU: targets y (N, with ignored ones) also kept on the host, hidden (N, C),
// weight (V, C), random from `seed`.
struct GpuLossProblem {
  GpuLossProblem(CudaOps& gpu, int64_t N_, int64_t C_, int64_t V_, uint64_t seed)
      : N(N_), C(C_), V(V_), y(random_targets(N, V, seed)),
        hidden(upload(gpu, random_floats(size_t(N * C), seed + 1), {N, C})),
        weight(upload(gpu, random_floats(size_t(V * C), seed + 2), {V, C})), targets(upload_i32(gpu, y, {N})) {}
  int64_t N, C, V;
  std::vector<int32_t> y;
  Tensor hidden, weight, targets;
};

TEST(CudaCrossEntropy, HostTargetsGiveTheSameResultWithoutCopyingBack) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const GpuLossProblem p(*be.gpu, 3001, 32, 517, 21);
  const int64_t N = p.N, C = p.C, V = p.V;
  const std::vector<int32_t>& y = p.y;
  const Tensor &hidden = p.hidden, &weight = p.weight, &targets = p.targets;
  std::vector<float> dh[2], dw[2];
  double loss[2];
  int64_t valid[2];
  TokenMetrics metrics[2];
  for (int with_host = 0; with_host < 2; ++with_host) {
    const Tensor dhidden = poisoned(*be.gpu, {N, C});
    const Tensor dweight = upload(*be.gpu, std::vector<float>(size_t(V * C), 0.0f), {V, C});
    loss[with_host] = be.gpu->cross_entropy_fwd_bwd(hidden, weight, targets, 0.01f, dhidden, dweight, 700,
                                                    &valid[with_host], &metrics[with_host],
                                                    with_host ? y.data() : nullptr);
    dh[with_host] = download(*be.gpu, dhidden);
    dw[with_host] = download(*be.gpu, dweight);
  }
  EXPECT_EQ(loss[1], loss[0]);
  EXPECT_EQ(valid[1], valid[0]);
  EXPECT_EQ(metrics[1].entropy_sum, metrics[0].entropy_sum);
  EXPECT_EQ(metrics[1].top1, metrics[0].top1);
  EXPECT_TRUE(close_normalized(dh[1], dh[0], 0.0)) << "dhidden";
  EXPECT_TRUE(close_normalized(dw[1], dw[0], 0.0)) << "dweight";
  // And both match the CPU (the compaction kept the rows and their order).
  const Tensor h_cpu = upload(*be.cpu, download(*be.gpu, hidden), {N, C});
  const Tensor w_cpu = upload(*be.cpu, download(*be.gpu, weight), {V, C});
  int64_t valid_cpu = 0;
  const double loss_cpu = be.cpu->cross_entropy_fwd_bwd(h_cpu, w_cpu, upload_i32(*be.cpu, y, {N}), 0.01f, Tensor(),
                                                        Tensor(), 700, &valid_cpu);
  EXPECT_EQ(valid[1], valid_cpu);
  EXPECT_NEAR(loss[1], loss_cpu, 1e-5 * std::fabs(loss_cpu));
  std::vector<int32_t> bad = y;
  bad[1234] = static_cast<int32_t>(V);
  int64_t ignored = 0;
  EXPECT_THROW(be.gpu->cross_entropy_fwd_bwd(hidden, weight, targets, 1.0f, Tensor(), Tensor(), 64, &ignored, nullptr,
                                             bad.data()),
               UserError);
}

// docs/CUDA-REVIEW-FIXES.md defect 6: with host targets the deferred call queues everything and returns while the
// backend's stream is still held by a host callback (a synchronising call would never return: the
// test would hang and time out rather than pass); wait() then gives the immediate call's numbers bit
// for bit.
TEST(CudaCrossEntropy, DeferredLossDoesNotWaitForTheStream) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const GpuLossProblem p(*be.gpu, 1201, 32, 517, 31);
  const int64_t N = p.N, C = p.C, V = p.V;
  const std::vector<int32_t>& y = p.y;
  const Tensor &hidden = p.hidden, &weight = p.weight, &targets = p.targets;
  TokenMetrics now_metrics;
  int64_t now_valid = 0;
  const Tensor dh_now = be.gpu->allocate({N, C}), dw_now = upload(*be.gpu, std::vector<float>(size_t(V * C), 0.0f), {V, C});
  const double now = be.gpu->cross_entropy_fwd_bwd(hidden, weight, targets, 0.01f, dh_now, dw_now, 300, &now_valid,
                                                   &now_metrics, y.data());
  const Tensor dh = be.gpu->allocate({N, C}), dw = upload(*be.gpu, std::vector<float>(size_t(V * C), 0.0f), {V, C});
  be.gpu->synchronize();
  std::atomic<bool> go{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  TRLHPC_CHECK_CUDA(cudaLaunchHostFunc(static_cast<cudaStream_t>(be.gpu->stream_handle()), hold, &go));
  int64_t valid = 0;
  std::unique_ptr<PendingLoss> pending =
      be.gpu->cross_entropy_deferred(hidden, weight, targets, 0.01f, dh, dw, 300, &valid, true, y.data(), 0.0f);
  EXPECT_EQ(valid, now_valid) << "the count is known before the device runs";
  go = true;  // reached only if the call did not wait for the held stream
  TokenMetrics metrics;
  const double later = pending->wait(&metrics);
  EXPECT_EQ(later, now);
  EXPECT_TRUE(metrics.computed);
  EXPECT_EQ(metrics.entropy_sum, now_metrics.entropy_sum);
  EXPECT_EQ(metrics.top1, now_metrics.top1);
  EXPECT_TRUE(close_normalized(download(*be.gpu, dh), download(*be.gpu, dh_now), 0.0)) << "dhidden";
  EXPECT_TRUE(close_normalized(download(*be.gpu, dw), download(*be.gpu, dw_now), 0.0)) << "dweight";
}

}  // namespace
}  // namespace trlhpc::cuda_test
