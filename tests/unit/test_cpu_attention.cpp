// Tests of kernels/cpu/attention.cpp (+ attention_bwd.cpp) against a naive double-precision reference.
//
// Forward: o and lse against the reference on causal, packed (several documents per row, positions
// restarting), ring-block (Tq != Tk, offset positions) and no-allowed-key layouts, with GQA (KVH = 2 and
// KVH = 1) and odd lengths straddling the 64-wide tiles. Backward: against central finite differences of
// L = sum(o * dout) taken in double through the reference (step 1e-4: truncation error ~h^2 |f'''| ~ 1e-8,
// rounding ~1e-16 |L| / h ~ 1e-11, so the FD gradient is exact to ~1e-8 and the tolerance only covers the
// fp32 kernel), and against the analytic double backward on larger shapes. Also: attention_merge of two
// key blocks reproduces the full attention, block-wise backwards with the global lse/o sum to the full
// backward, gradients accumulate, and results do not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attention_reference.hpp"
#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using namespace trlhpc::testing::attention_reference;

void check_against_finite_differences(const Problem& p) {
  const Result got = run_both(p);
  // The analytic double backward is also checked against FD, to tie the big-shape tests to FD.
  const Reference want = reference(p, true);
  const std::vector<double> fd_q = finite_difference(p, 0), fd_k = finite_difference(p, 1),
                            fd_v = finite_difference(p, 2);
  EXPECT_TRUE(all_close(got.dq, fd_q, 2e-5, 2e-5)) << "dq vs finite differences";
  EXPECT_TRUE(all_close(got.dk, fd_k, 2e-5, 2e-5)) << "dk vs finite differences";
  EXPECT_TRUE(all_close(got.dv, fd_v, 2e-5, 2e-5)) << "dv vs finite differences";
  std::vector<float> ref_dq(want.dq.begin(), want.dq.end());
  EXPECT_TRUE(all_close(ref_dq, fd_q, 1e-6, 1e-7)) << "double reference dq vs finite differences";
}

class AttentionTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

TEST_F(AttentionTest, CausalSingleDocumentForward) {
  for (int64_t T : {1, 7, 33, 64, 65, 130}) {
    for (auto [NH, KVH, HS] : {std::tuple{4, 2, 16}, std::tuple{4, 1, 8}, std::tuple{2, 2, 64}}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " NH=" + std::to_string(NH) + " KVH=" + std::to_string(KVH) +
                   " HS=" + std::to_string(HS));
      const Problem p = make_problem(2, T, T, NH, KVH, HS, 10 + T);
      expect_forward_matches(run_forward(p), reference(p, false));
    }
  }
}

TEST_F(AttentionTest, CausalBackwardFiniteDifferences) {
  for (int64_t T : {1, 7, 13}) {
    SCOPED_TRACE("T=" + std::to_string(T));
    check_against_finite_differences(make_problem(1, T, T, 4, 2, 8, 20 + T));
  }
  check_against_finite_differences(make_problem(1, 9, 9, 2, 1, 16, 31));  // KVH = 1
}

TEST_F(AttentionTest, PackedDocumentsFiniteDifferences) {
  Problem p = make_problem(2, 17, 17, 4, 2, 8, 40);
  pack_documents(p, 6, 41);
  check_against_finite_differences(p);
}

TEST_F(AttentionTest, CausalBackwardLargeShapes) {
  for (int64_t T : {33, 64, 150}) {
    for (auto [NH, KVH, HS] : {std::tuple{4, 2, 16}, std::tuple{4, 1, 8}, std::tuple{2, 2, 64}}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " HS=" + std::to_string(HS));
      const Problem p = make_problem(2, T, T, NH, KVH, HS, 50 + T);
      const Result got = run_both(p);
      const Reference want = reference(p, true);
      expect_forward_matches(got, want);
      expect_backward_matches(got, want);
    }
  }
}

TEST_F(AttentionTest, PackedDocumentsForwardAndBackward) {
  for (int max_len : {3, 40, 100}) {
    SCOPED_TRACE("max_len=" + std::to_string(max_len));
    Problem p = make_problem(2, 200, 200, 4, 2, 16, 60 + max_len);
    pack_documents(p, max_len, 61 + max_len);
    const Result got = run_both(p);
    const Reference want = reference(p, true);
    expect_forward_matches(got, want);
    expect_backward_matches(got, want);
  }
}

// A ring-attention block: the queries are the chunk at positions [Tk, Tk + Tq) and the keys an earlier
// chunk, so every pair is allowed; the reverse block (keys in the future) allows nothing.
TEST_F(AttentionTest, RingBlockWithOffsetPositions) {
  Problem past = make_problem(2, 33, 70, 4, 2, 16, 70);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 33; ++i) past.q_pos[b * 33 + i] = static_cast<int32_t>(70 + i);
  Result got = run_both(past);
  Reference want = reference(past, true);
  expect_forward_matches(got, want);
  expect_backward_matches(got, want);

  Problem future = make_problem(1, 70, 33, 4, 2, 16, 71);
  for (int64_t j = 0; j < 33; ++j) future.k_pos[j] = static_cast<int32_t>(70 + j);
  got = run_both(future);
  for (float x : got.lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  for (float x : got.o) EXPECT_EQ(x, 0.0f);
  for (float x : got.dq) EXPECT_EQ(x, 0.0f);
  for (float x : got.dk) EXPECT_EQ(x, 0.0f);
  for (float x : got.dv) EXPECT_EQ(x, 0.0f);
}

// Query 3 belongs to a document with no key in this block, and query 5's only key is in its future.
TEST_F(AttentionTest, QueryWithNoAllowedKey) {
  Problem p = make_problem(1, 8, 8, 4, 2, 8, 80);
  p.q_doc[3] = 9;
  p.q_doc[5] = 7, p.q_pos[5] = 0, p.k_doc[6] = 7, p.k_pos[6] = 4;
  const Result got = run_both(p);
  const Reference want = reference(p, true);
  expect_forward_matches(got, want);
  expect_backward_matches(got, want);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i : {3, 5}) {
      EXPECT_EQ(got.lse[h * 8 + i], -std::numeric_limits<float>::infinity()) << "h=" << h << " i=" << i;
      for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(got.o[(i * 4 + h) * 8 + d], 0.0f);
    }
  check_against_finite_differences(p);
}

// Ring attention: split the keys into two blocks, run each, merge by log-sum-exp; then run each block's
// backward with the merged (global) o and lse, accumulating into the same dq/dk/dv.
TEST_F(AttentionTest, MergeOfTwoKeyBlocksReproducesFullAttention) {
  for (int64_t split : {1, 40, 64, 69}) {
    SCOPED_TRACE("split=" + std::to_string(split));
    Problem full = make_problem(2, 70, 70, 4, 2, 16, 90);
    pack_documents(full, 30, 91);
    const Reference want = reference(full, true);
    auto block = [&](int64_t j0, int64_t j1) {
      Problem blk = full;
      blk.Tk = j1 - j0;
      blk.k.clear(), blk.v.clear(), blk.k_pos.clear(), blk.k_doc.clear();
      const int64_t row = full.KVH * full.HS;
      for (int64_t b = 0; b < full.B; ++b) {
        blk.k.insert(blk.k.end(), full.k.begin() + (b * 70 + j0) * row, full.k.begin() + (b * 70 + j1) * row);
        blk.v.insert(blk.v.end(), full.v.begin() + (b * 70 + j0) * row, full.v.begin() + (b * 70 + j1) * row);
        blk.k_pos.insert(blk.k_pos.end(), full.k_pos.begin() + b * 70 + j0, full.k_pos.begin() + b * 70 + j1);
        blk.k_doc.insert(blk.k_doc.end(), full.k_doc.begin() + b * 70 + j0, full.k_doc.begin() + b * 70 + j1);
      }
      return blk;
    };
    const Problem first = block(0, split), second = block(split, 70);
    Result acc = run_forward(first);
    const Result other = run_forward(second);
    trlhpc::cpu::attention_merge(acc.o.data(), acc.lse.data(), other.o.data(), other.lse.data(), full.B, full.Tq,
                                 full.NH, full.HS);
    expect_forward_matches(acc, want);

    // Backward per block; dk/dv of each block land in their slice of the full tensors.
    Result g1, g2;
    g1.dq.assign(full.q.size(), 0.0f), g1.dk.assign(first.k.size(), 0.0f), g1.dv.assign(first.v.size(), 0.0f);
    run_backward(first, acc.o, acc.lse, g1);
    g2.dq = g1.dq;  // the second block accumulates into the same dq
    g2.dk.assign(second.k.size(), 0.0f), g2.dv.assign(second.v.size(), 0.0f);
    run_backward(second, acc.o, acc.lse, g2);
    Result got;
    got.dq = g2.dq;
    const int64_t row = full.KVH * full.HS;
    for (int64_t b = 0; b < full.B; ++b) {
      auto append = [&](std::vector<float>& dst, const std::vector<float>& src, int64_t len) {
        dst.insert(dst.end(), src.begin() + b * len * row, src.begin() + (b + 1) * len * row);
      };
      append(got.dk, g1.dk, split), append(got.dk, g2.dk, 70 - split);
      append(got.dv, g1.dv, split), append(got.dv, g2.dv, 70 - split);
    }
    expect_backward_matches(got, want);
  }
}

// Enough heads x tiles that the backward's stored dS tiles exceed its 64 MiB budget, so the query
// tiles are processed in several slabs (here 2 x 40 x 9 x 16 KiB = 11.5 MiB per query tile: slabs of 5).
TEST_F(AttentionTest, BackwardOverSeveralQuerySlabs) {
  Problem p = make_problem(2, 520, 520, 40, 8, 8, 95);
  pack_documents(p, 300, 96);
  const Result got = run_both(p);
  const Reference want = reference(p, true);
  expect_forward_matches(got, want);
  expect_backward_matches(got, want);
}

// An empty key block (Tk = 0): every query has no allowed key, the backward adds nothing.
TEST_F(AttentionTest, EmptyKeyBlock) {
  Problem p = make_problem(2, 5, 0, 4, 2, 8, 97);
  const Result got = run_both(p);
  for (float x : got.lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  for (float x : got.o) EXPECT_EQ(x, 0.0f);
  for (float x : got.dq) EXPECT_EQ(x, 0.0f);
}

TEST_F(AttentionTest, RejectsHeadsThatDoNotGroup) {
  Problem p = make_problem(1, 4, 4, 3, 2, 8, 98);
  EXPECT_THROW(run_forward(p), trlhpc::UserError);
}

TEST_F(AttentionTest, GradientsAccumulate) {
  Problem p = make_problem(1, 33, 33, 4, 2, 16, 100);
  Result r = run_forward(p);
  r.dq = random_floats(p.q.size(), 101), r.dk = random_floats(p.k.size(), 102), r.dv = random_floats(p.v.size(), 103);
  const Result before = r;
  run_backward(p, r.o, r.lse, r);
  const Reference want = reference(p, true);
  Reference shifted = want;
  for (size_t i = 0; i < shifted.dq.size(); ++i) shifted.dq[i] += before.dq[i];
  for (size_t i = 0; i < shifted.dk.size(); ++i) shifted.dk[i] += before.dk[i];
  for (size_t i = 0; i < shifted.dv.size(); ++i) shifted.dv[i] += before.dv[i];
  expect_backward_matches(r, shifted);
}

TEST_F(AttentionTest, ResultsDoNotDependOnThreadCount) {
  Problem p = make_problem(2, 150, 150, 4, 2, 16, 110);
  pack_documents(p, 70, 111);
  omp_set_num_threads(1);
  const Result one = run_both(p);
  omp_set_num_threads(3);
  const Result three = run_both(p);
  EXPECT_EQ(one.o, three.o);
  EXPECT_EQ(one.lse, three.lse);
  EXPECT_EQ(one.dq, three.dq);
  EXPECT_EQ(one.dk, three.dk);
  EXPECT_EQ(one.dv, three.dv);
}

}  // namespace
