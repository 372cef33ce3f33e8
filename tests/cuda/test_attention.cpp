// CUDA flash attention against the CPU primitive: plain causal, packed documents, GQA, ring-attention
// blocks (Tq != Tk, offset positions), queries with no allowed key, odd lengths that straddle the
// tiles, sliding windows, softcapped scores (Gemma 2), head sizes 24 (fp32 only), 64 and 128, fp32 and bf16; forward
// (o, lse) and backward (dq, dk, dv accumulate), the log-sum-exp merge, and bitwise reproducibility of the backward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

struct Layout {
  int64_t B, Tq, Tk, NH, KVH, HS;
  enum Kind { kCausal, kPacked, kRingBlock, kOrphanQueries } kind;
  int64_t window = 0;  // sliding window (AttentionShape::window), 0 = none
  float softcap = 0.0f;  // tanh softcapping of the scores (AttentionShape::softcap), 0 = none
};

struct Ids {
  std::vector<int32_t> q_pos, q_doc, k_pos, k_doc;
};

Ids make_ids(const Layout& l, uint64_t seed) {
  Ids ids;
  ids.q_pos.resize(static_cast<size_t>(l.B * l.Tq)), ids.q_doc.resize(ids.q_pos.size());
  ids.k_pos.resize(static_cast<size_t>(l.B * l.Tk)), ids.k_doc.resize(ids.k_pos.size());
  std::mt19937 gen(static_cast<uint32_t>(seed));
  for (int64_t b = 0; b < l.B; ++b) {
    if (l.kind == Layout::kPacked) {  // documents of 1..50 tokens, positions restarting (Tq == Tk)
      int32_t doc = 0, pos = 0;
      int left = 1 + static_cast<int>(gen() % 50);
      for (int64_t i = 0; i < l.Tq; ++i) {
        if (left-- == 0) ++doc, pos = 0, left = static_cast<int>(gen() % 50);
        ids.q_doc[b * l.Tq + i] = ids.k_doc[b * l.Tk + i] = doc + 1000 * static_cast<int32_t>(b);
        ids.q_pos[b * l.Tq + i] = ids.k_pos[b * l.Tk + i] = pos++;
      }
      continue;
    }
    // Causal / ring block: queries sit after the keys when Tq != Tk (a later zigzag chunk).
    const int32_t q_offset = l.kind == Layout::kRingBlock ? static_cast<int32_t>(l.Tk) : 0;
    for (int64_t j = 0; j < l.Tk; ++j) ids.k_pos[b * l.Tk + j] = static_cast<int32_t>(j), ids.k_doc[b * l.Tk + j] = 7;
    for (int64_t i = 0; i < l.Tq; ++i) {
      ids.q_pos[b * l.Tq + i] = q_offset + static_cast<int32_t>(i);
      // Orphans: every third query belongs to a document with no keys (o = 0, lse = -inf).
      ids.q_doc[b * l.Tq + i] = l.kind == Layout::kOrphanQueries && i % 3 == 1 ? 99 : 7;
    }
  }
  return ids;
}

AttentionShape shape_of(const Layout& l) {
  return AttentionShape{l.B, l.Tq, l.Tk, l.NH, l.KVH, l.HS, static_cast<float>(1.0 / std::sqrt(double(l.HS))),
                        l.window, l.softcap};
}

void check_layout(Backends& be, const Layout& l, DType dtype, uint64_t seed) {
  const AttentionShape s = shape_of(l);
  const Ids ids = make_ids(l, seed);
  const int64_t nq = l.B * l.Tq * l.NH * l.HS, nk = l.B * l.Tk * l.KVH * l.HS;
  const Pair q = both(be, random_floats(static_cast<size_t>(nq), seed + 1, 1.5f), {nq}, dtype);
  const Pair k = both(be, random_floats(static_cast<size_t>(nk), seed + 2, 1.5f), {nk}, dtype);
  const Pair v = both(be, random_floats(static_cast<size_t>(nk), seed + 3), {nk}, dtype);
  const Pair q_pos = both_i32(be, ids.q_pos, {l.B * l.Tq}), q_doc = both_i32(be, ids.q_doc, {l.B * l.Tq});
  const Pair k_pos = both_i32(be, ids.k_pos, {l.B * l.Tk}), k_doc = both_i32(be, ids.k_doc, {l.B * l.Tk});
  const Pair o = both_poisoned(be, {nq}, dtype), lse = both_poisoned(be, {l.B * l.NH * l.Tq});
  be.cpu->attention_fwd(q.cpu, k.cpu, v.cpu, q_pos.cpu, k_pos.cpu, q_doc.cpu, k_doc.cpu, o.cpu, lse.cpu, s);
  be.gpu->attention_fwd(q.gpu, k.gpu, v.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu, k_doc.gpu, o.gpu, lse.gpu, s);
  const std::string where = "B " + std::to_string(l.B) + " Tq " + std::to_string(l.Tq) + " Tk " +
                            std::to_string(l.Tk) + " NH " + std::to_string(l.NH) + " KVH " + std::to_string(l.KVH) +
                            " HS " + std::to_string(l.HS) + " kind " + std::to_string(l.kind) + " " + dtype_name(dtype);
  EXPECT_TRUE(matches(be, o, tolerance(dtype))) << "o, " << where;
  EXPECT_TRUE(matches(be, lse, dtype == DType::BF16 ? 1e-4 : kF32Tolerance)) << "lse, " << where;

  // Backward from the CPU's o and lse on both sides, into zeroed gradients.
  const Pair dout = both(be, random_floats(static_cast<size_t>(nq), seed + 4), {nq}, dtype);
  const std::vector<float> o_ref = download(*be.cpu, o.cpu), lse_ref = download(*be.cpu, lse.cpu);
  const Pair o_in = both(be, o_ref, {nq}, dtype), lse_in = both(be, lse_ref, {l.B * l.NH * l.Tq});
  const Pair dq = both(be, std::vector<float>(static_cast<size_t>(nq), 0.0f), {nq}, dtype);
  const Pair dk = both(be, std::vector<float>(static_cast<size_t>(nk), 0.0f), {nk}, dtype);
  const Pair dv = both(be, std::vector<float>(static_cast<size_t>(nk), 0.0f), {nk}, dtype);
  be.cpu->attention_bwd(q.cpu, k.cpu, v.cpu, o_in.cpu, lse_in.cpu, dout.cpu, q_pos.cpu, k_pos.cpu, q_doc.cpu,
                        k_doc.cpu, dq.cpu, dk.cpu, dv.cpu, s);
  be.gpu->attention_bwd(q.gpu, k.gpu, v.gpu, o_in.gpu, lse_in.gpu, dout.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu,
                        k_doc.gpu, dq.gpu, dk.gpu, dv.gpu, s);
  const double tol = tolerance(dtype);
  EXPECT_TRUE(matches(be, dq, tol)) << "dq, " << where;
  EXPECT_TRUE(matches(be, dk, tol)) << "dk, " << where;
  EXPECT_TRUE(matches(be, dv, tol)) << "dv, " << where;
  if (dtype == DType::BF16) return;

  // Accumulation: a second backward adds the same gradients again, bit for bit (deterministic).
  const std::vector<float> dq1 = download(*be.gpu, dq.gpu), dk1 = download(*be.gpu, dk.gpu);
  be.gpu->attention_bwd(q.gpu, k.gpu, v.gpu, o_in.gpu, lse_in.gpu, dout.gpu, q_pos.gpu, k_pos.gpu, q_doc.gpu,
                        k_doc.gpu, dq.gpu, dk.gpu, dv.gpu, s);
  std::vector<float> twice_q = dq1, twice_k = dk1;
  for (float& x : twice_q) x *= 2;
  for (float& x : twice_k) x *= 2;
  EXPECT_TRUE(close_normalized(download(*be.gpu, dq.gpu), twice_q, 1e-7)) << "dq accumulate, " << where;
  EXPECT_TRUE(close_normalized(download(*be.gpu, dk.gpu), twice_k, 1e-7)) << "dk accumulate, " << where;
}

TEST(CudaAttention, MatchesCpuOnEveryLayout) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const std::vector<Layout> layouts = {
      {1, 1, 1, 1, 1, 64, Layout::kCausal},        {2, 130, 130, 4, 2, 64, Layout::kCausal},
      {2, 200, 200, 6, 2, 64, Layout::kPacked},    {1, 96, 96, 2, 1, 128, Layout::kCausal},
      {2, 64, 100, 4, 4, 64, Layout::kRingBlock},  {1, 77, 77, 4, 2, 64, Layout::kOrphanQueries},
      {1, 1024, 1024, 2, 1, 64, Layout::kCausal},  {3, 300, 300, 2, 1, 128, Layout::kPacked}};
  uint64_t seed = 10;
  for (const Layout& l : layouts)
    for (DType dtype : {DType::F32, DType::BF16}) check_layout(be, l, dtype, seed += 10);
  // Head size 24 (not a multiple of 16): fp32 only; bf16 is refused with a clear message.
  check_layout(be, {1, 77, 77, 3, 3, 24, Layout::kPacked}, DType::F32, seed += 10);
  check_layout(be, {2, 33, 70, 2, 1, 24, Layout::kRingBlock}, DType::F32, seed += 10);
  // Sliding windows: 1 (itself only), 2, shorter and longer than a tile, longer than the row; a ring
  // block whose keys are partly (window 40) or entirely (window 1) outside the window.
  for (int64_t window : {1, 2, 37, 129, 5000})
    for (DType dtype : {DType::F32, DType::BF16}) {
      check_layout(be, {2, 300, 300, 4, 2, 64, Layout::kCausal, window}, dtype, seed += 10);
      check_layout(be, {2, 200, 200, 6, 2, 64, Layout::kPacked, window}, dtype, seed += 10);
    }
  for (int64_t window : {1, 40})
    check_layout(be, {2, 64, 100, 4, 4, 64, Layout::kRingBlock, window}, DType::F32, seed += 10);
  // Softcapping (scores of standard deviation ~1.5 here: cap 1 saturates most of them, cap 50 hardly any),
  // with and without a window, and a ring block.
  for (float cap : {1.0f, 50.0f})
    for (DType dtype : {DType::F32, DType::BF16}) {
      check_layout(be, {2, 130, 130, 4, 2, 64, Layout::kCausal, 0, cap}, dtype, seed += 10);
      check_layout(be, {2, 200, 200, 6, 2, 64, Layout::kPacked, 37, cap}, dtype, seed += 10);
      check_layout(be, {2, 64, 100, 4, 4, 64, Layout::kRingBlock, 40, cap}, dtype, seed += 10);
    }
}

TEST(CudaAttention, Bf16NeedsHeadSizeMultipleOf16) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Layout l{1, 8, 8, 1, 1, 24, Layout::kCausal};
  const Ids ids = make_ids(l, 1);
  Tensor q = poisoned(*be.gpu, {8 * 24}, DType::BF16), o = poisoned(*be.gpu, {8 * 24}, DType::BF16);
  Tensor pos = upload_i32(*be.gpu, ids.q_pos, {8}), doc = upload_i32(*be.gpu, ids.q_doc, {8});
  Tensor lse = poisoned(*be.gpu, {8});
  EXPECT_THROW(be.gpu->attention_fwd(q, q, q, pos, pos, doc, doc, o, lse, shape_of(l)), UserError);
}

TEST(CudaAttention, MergeOfTwoKeyBlocksIsTheFullAttention) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t B = 2, Tq = 70, Tk = 140, NH = 4, KVH = 2, HS = 64;
  const Layout full_l{B, Tq, Tk, NH, KVH, HS, Layout::kRingBlock};
  const Ids ids = make_ids(full_l, 5);
  const AttentionShape full = shape_of(full_l);
  AttentionShape half = full;
  half.Tk = Tk / 2;
  const std::vector<float> q = random_floats(static_cast<size_t>(B * Tq * NH * HS), 6, 1.5f);
  const std::vector<float> k = random_floats(static_cast<size_t>(B * Tk * KVH * HS), 7, 1.5f);
  const std::vector<float> v = random_floats(static_cast<size_t>(B * Tk * KVH * HS), 8);
  // The two key blocks (first and second half of each row).
  auto half_rows = [&](const std::vector<float>& x, int64_t width, int64_t part) {
    std::vector<float> out;
    for (int64_t b = 0; b < B; ++b)
      out.insert(out.end(), x.begin() + (b * Tk + part * Tk / 2) * width, x.begin() + (b * Tk + (part + 1) * Tk / 2) * width);
    return out;
  };
  auto half_ids = [&](const std::vector<int32_t>& x, int64_t part) {
    std::vector<int32_t> out;
    for (int64_t b = 0; b < B; ++b)
      out.insert(out.end(), x.begin() + b * Tk + part * Tk / 2, x.begin() + b * Tk + (part + 1) * Tk / 2);
    return out;
  };
  Ops& gpu = *be.gpu;
  const Tensor qg = upload(gpu, q, {B * Tq * NH * HS}), q_pos = upload_i32(gpu, ids.q_pos, {B * Tq});
  const Tensor q_doc = upload_i32(gpu, ids.q_doc, {B * Tq});
  Tensor o_full = poisoned(gpu, {B * Tq * NH * HS}), lse_full = poisoned(gpu, {B * NH * Tq});
  gpu.attention_fwd(qg, upload(gpu, k, {B * Tk * KVH * HS}), upload(gpu, v, {B * Tk * KVH * HS}), q_pos,
                    upload_i32(gpu, ids.k_pos, {B * Tk}), q_doc, upload_i32(gpu, ids.k_doc, {B * Tk}), o_full, lse_full,
                    full);
  Tensor o_acc, lse_acc;
  for (int64_t part = 0; part < 2; ++part) {
    Tensor o = poisoned(gpu, {B * Tq * NH * HS}), lse = poisoned(gpu, {B * NH * Tq});
    gpu.attention_fwd(qg, upload(gpu, half_rows(k, KVH * HS, part), {B * Tk / 2 * KVH * HS}),
                      upload(gpu, half_rows(v, KVH * HS, part), {B * Tk / 2 * KVH * HS}), q_pos,
                      upload_i32(gpu, half_ids(ids.k_pos, part), {B * Tk / 2}), q_doc,
                      upload_i32(gpu, half_ids(ids.k_doc, part), {B * Tk / 2}), o, lse, half);
    if (part == 0) {
      o_acc = o, lse_acc = lse;
    } else {
      gpu.attention_merge(o_acc, lse_acc, o, lse, half);
    }
  }
  EXPECT_TRUE(close_normalized(download(gpu, o_acc), download(gpu, o_full), kF32Tolerance));
  EXPECT_TRUE(close_normalized(download(gpu, lse_acc), download(gpu, lse_full), kF32Tolerance));
}

}  // namespace
}  // namespace trlhpc::cuda_test
