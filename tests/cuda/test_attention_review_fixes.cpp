// CUDA attention against the review's defects (docs/CUDA-REVIEW-FIXES.md):
//   1. bf16 attention accumulating over several calls (ring attention's steps) into fp32 gradients:
//      the increment must match the CPU's to the bf16 tolerance even onto large existing gradients;
//      before the fix fp32 accumulators were refused and bf16 ones rounded at every call.
//   2. the tiles chosen for the device must let two blocks share an SM (runtime occupancy query).
// The forward into an fp32 output (ring attention's o before the merge) is checked as well.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>

#include "attention.cuh"
#include "cuda_test_util.hpp"
#include "device_query.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

struct Problem {
  AttentionShape s;
  std::vector<int32_t> q_pos, k_pos, doc_q, doc_k;
};

// A ring-attention block: Tq queries after Tk keys of one document (every pair allowed, causal tiles).
Problem ring_block(int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH, int64_t HS) {
  Problem p;
  p.s = AttentionShape{1, Tq, Tk, NH, KVH, HS, static_cast<float>(1.0 / std::sqrt(double(HS))), 0};
  for (int64_t j = 0; j < Tk; ++j) p.k_pos.push_back(static_cast<int32_t>(j)), p.doc_k.push_back(3);
  for (int64_t i = 0; i < Tq; ++i) p.q_pos.push_back(static_cast<int32_t>(Tk / 2 + i)), p.doc_q.push_back(3);
  return p;
}

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

TEST(CudaAttentionReview, Bf16BackwardAccumulatesInFp32OverRingSteps) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Problem p = ring_block(200, 256, 4, 2, 64);
  const AttentionShape& s = p.s;
  const int64_t nq = s.B * s.Tq * s.NH * s.HS, nk = s.B * s.Tk * s.KVH * s.HS;
  const DType bf = DType::BF16;
  const Pair q = both(be, random_floats(size_t(nq), 11, 1.5f), {nq}, bf);
  const Pair k = both(be, random_floats(size_t(nk), 12, 1.5f), {nk}, bf);
  const Pair v = both(be, random_floats(size_t(nk), 13), {nk}, bf);
  const Pair dout = both(be, random_floats(size_t(nq), 14), {nq}, bf);
  const Pair q_pos = both_i32(be, p.q_pos, {s.Tq}), q_doc = both_i32(be, p.doc_q, {s.Tq});
  const Pair k_pos = both_i32(be, p.k_pos, {s.Tk}), k_doc = both_i32(be, p.doc_k, {s.Tk});
  // o in bf16 as the layer stores it; lse fp32.
  const Pair o = both_poisoned(be, {nq}, bf), lse = both_poisoned(be, {s.Tq * s.NH});
  be.cpu->attention_fwd(q.cpu, k.cpu, v.cpu, q_pos.cpu, k_pos.cpu, q_doc.cpu, k_doc.cpu, o.cpu, lse.cpu, s);
  be.gpu->attention_fwd(q.gpu, k.gpu, v.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu, k_doc.gpu, o.gpu, lse.gpu, s);
  const Pair o_same = both(be, round_bf16(download(*be.gpu, o.gpu)), {nq}, bf);  // one o for both sides

  // Existing gradients 20x the size of one step's contribution (several ring steps already added).
  const std::vector<float> dq0 = random_floats(size_t(nq), 15, 20.0f), dk0 = random_floats(size_t(nk), 16, 20.0f);
  const std::vector<float> dv0 = random_floats(size_t(nk), 17, 20.0f);
  const Pair dq = both(be, dq0, {nq}), dk = both(be, dk0, {nk}), dv = both(be, dv0, {nk});  // F32 on both
  for (int step = 0; step < 4; ++step) {
    be.cpu->attention_bwd(q.cpu, k.cpu, v.cpu, o_same.cpu, lse.cpu, dout.cpu, q_pos.cpu, k_pos.cpu, q_doc.cpu,
                          k_doc.cpu, dq.cpu, dk.cpu, dv.cpu, s);
    be.gpu->attention_bwd(q.gpu, k.gpu, v.gpu, o_same.gpu, lse.gpu, dout.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu,
                          k_doc.gpu, dq.gpu, dk.gpu, dv.gpu, s);
  }
  // The tolerance applies to what the four calls added, not to the (large) starting values.
  const struct {
    const char* name;
    const Pair& grad;
    const std::vector<float>& start;
  } grads[] = {{"dq", dq, dq0}, {"dk", dk, dk0}, {"dv", dv, dv0}};
  for (const auto& g : grads)
    EXPECT_TRUE(close_normalized(minus(download(*be.gpu, g.grad.gpu), g.start),
                                 minus(download(*be.cpu, g.grad.cpu), g.start), kBf16Tolerance))
        << g.name << " increment";
}

TEST(CudaAttentionReview, Bf16ForwardIntoFp32OutputMatchesCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Problem p = ring_block(130, 192, 4, 4, 128);
  const AttentionShape& s = p.s;
  const int64_t nq = s.Tq * s.NH * s.HS, nk = s.Tk * s.KVH * s.HS;
  const Pair q = both(be, random_floats(size_t(nq), 21), {nq}, DType::BF16);
  const Pair k = both(be, random_floats(size_t(nk), 22), {nk}, DType::BF16);
  const Pair v = both(be, random_floats(size_t(nk), 23), {nk}, DType::BF16);
  const Pair q_pos = both_i32(be, p.q_pos, {s.Tq}), q_doc = both_i32(be, p.doc_q, {s.Tq});
  const Pair k_pos = both_i32(be, p.k_pos, {s.Tk}), k_doc = both_i32(be, p.doc_k, {s.Tk});
  const Pair o = both_poisoned(be, {nq}, DType::F32), lse = both_poisoned(be, {s.Tq * s.NH});
  be.cpu->attention_fwd(q.cpu, k.cpu, v.cpu, q_pos.cpu, k_pos.cpu, q_doc.cpu, k_doc.cpu, o.cpu, lse.cpu, s);
  be.gpu->attention_fwd(q.gpu, k.gpu, v.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu, k_doc.gpu, o.gpu, lse.gpu, s);
  EXPECT_TRUE(matches(be, o, kBf16Tolerance));
  EXPECT_TRUE(matches(be, lse, 1e-4));
}

TEST(CudaAttentionReview, ChosenTilesFitTwoBlocksPerSm) {
  TRLHPC_REQUIRE_GPU();
  TRLHPC_CHECK_CUDA(cudaSetDevice(0));
  const kernels::SmemLimits limits = cuda::device_smem_limits(0);
  for (const int HS : {64, 128, 256})
    for (const kernels::AttentionPass pass :
         {kernels::AttentionPass::kForward, kernels::AttentionPass::kBackwardDkDv, kernels::AttentionPass::kBackwardDq}) {
      const kernels::AttentionTiles t = kernels::choose_attention_tiles(true, HS, pass, limits);
      const int planned = kernels::blocks_per_sm(t.smem, limits);
      const int runtime = cuda::attention_blocks_per_sm<__nv_bfloat16>(HS, pass, limits);
      SCOPED_TRACE(::testing::Message() << "bf16 HS " << HS << " pass " << static_cast<int>(pass) << " tile " << t.Br
                                        << "x" << t.Bc << " " << t.smem << " B");
      // The runtime agrees with the plan's shared-memory count (registers could only lower it).
      EXPECT_LE(runtime, planned);
      if (planned >= 2) EXPECT_GE(runtime, 2) << "the plan promised two blocks per SM";
    }
}

}  // namespace
}  // namespace trlhpc::cuda_test
