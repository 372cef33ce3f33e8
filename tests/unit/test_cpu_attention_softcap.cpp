// Softcapped attention (Gemma 2's attn_logit_softcapping) in kernels/cpu/attention.cpp (+ attention_bwd.cpp) against the naive
// double reference (attention_reference.hpp), whose scores are transformers' eager_attention_forward
// written out: s = scale q.k, then cap tanh(s / cap), then the mask; its backward multiplies dS by
// 1 - tanh(s / cap)^2, and is itself checked against finite differences here.
//
// Caps from 0.5 to 50 on scaled scores of standard deviation ~0.75 (make_problem: q, k uniform in
// [-1.5, 1.5], HS 16, scale 1/4), so the small caps saturate tanh on a large share of the scores
// (counted below: a test that saturates nothing could not tell a missing cap from a right one); causal
// and packed rows, sliding windows, GQA, rows of several 64-wide tiles, ring blocks (Tq != Tk, offset
// positions) merged with attention_merge, and the fp32-o / bf16 instantiations through the same code.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using namespace trlhpc::testing::attention_reference;

class AttentionSoftcapTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

// Share of the allowed scaled scores beyond half the cap (where cap tanh(s / cap) is more than 8% below s).
double saturated_share(const Problem& p) {
  int64_t beyond = 0, allowed_pairs = 0;
  const int64_t group = p.NH / p.KVH;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.NH; ++h)
      for (int64_t i = 0; i < p.Tq; ++i)
        for (int64_t j = 0; j < p.Tk; ++j) {
          if (!allowed(p, b, i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < p.HS; ++d)
            dot += static_cast<double>(p.q[((b * p.Tq + i) * p.NH + h) * p.HS + d]) *
                   p.k[((b * p.Tk + j) * p.KVH + h / group) * p.HS + d];
          beyond += std::abs(p.scale * dot) > 0.5 * p.softcap;
          ++allowed_pairs;
        }
  return static_cast<double>(beyond) / static_cast<double>(allowed_pairs);
}

TEST_F(AttentionSoftcapTest, CausalRowsMatchReference) {
  for (float cap : {0.5f, 1.0f, 2.0f, 50.0f}) {
    for (int64_t window : {0, 3, 70}) {
      for (int64_t T : {9, 130}) {
        SCOPED_TRACE("cap=" + std::to_string(cap) + " window=" + std::to_string(window) + " T=" + std::to_string(T));
        Problem p = make_problem(2, T, T, 4, 2, 16, 1300 + static_cast<uint64_t>(window + T));
        p.window = window;
        p.softcap = cap;
        if (cap <= 1.0f) {
          const double share = saturated_share(p);
          std::printf("[ measured ] cap %.1f window %ld T %ld: %.2f of the scores beyond half the cap\n", cap,
                      static_cast<long>(window), static_cast<long>(T), share);
          EXPECT_GT(share, 0.2);
        }
        expect_matches_reference(p);
      }
    }
  }
}

TEST_F(AttentionSoftcapTest, PackedDocumentsMatchReference) {
  for (float cap : {0.5f, 2.0f}) {
    for (int64_t window : {0, 5, 40}) {
      SCOPED_TRACE("cap=" + std::to_string(cap) + " window=" + std::to_string(window));
      Problem p = make_problem(2, 150, 150, 4, 1, 8, 1400 + static_cast<uint64_t>(window));
      pack_documents(p, 50, 1401);
      p.window = window;
      p.softcap = cap;
      expect_matches_reference(p);
    }
  }
}

// The reference's analytic backward (dS times 1 - t^2) against central differences of its own forward,
// and the kernel against both; tolerances as attention_reference.hpp reasons them.
TEST_F(AttentionSoftcapTest, FiniteDifferences) {
  Problem p = make_problem(1, 9, 9, 2, 1, 4, 1500);
  pack_documents(p, 6, 1501);
  p.window = 3;
  p.softcap = 0.4f;  // scale 1/2 on HS 4: most scores beyond 0.2
  p.scale = 0.5f;
  EXPECT_GT(saturated_share(p), 0.3);
  const Result got = run_both(p);
  const Reference want = reference(p, true);
  const std::vector<double> fd[3] = {finite_difference(p, 0), finite_difference(p, 1), finite_difference(p, 2)};
  EXPECT_TRUE(all_close(got.dq, fd[0], 2e-5, 2e-5)) << "dq";
  EXPECT_TRUE(all_close(got.dk, fd[1], 2e-5, 2e-5)) << "dk";
  EXPECT_TRUE(all_close(got.dv, fd[2], 2e-5, 2e-5)) << "dv";
  // Central differences with h = 1e-4 are exact to ~1e-8 here (h^2 times third derivatives of O(1)).
  const std::vector<double>* analytic[3] = {&want.dq, &want.dk, &want.dv};
  for (int which = 0; which < 3; ++which)
    for (size_t i = 0; i < fd[which].size(); ++i)
      EXPECT_NEAR((*analytic[which])[i], fd[which][i], 1e-7) << "reference gradient " << which << " element " << i;
}

// The cap is in effect: with cap 1 the output moves by O(0.1) from the uncapped one, and a huge cap
// (tanh(s / c) = s / c to within (s / c)^3 / 3) leaves it within fp32 rounding of the uncapped one.
TEST_F(AttentionSoftcapTest, SmallCapChangesTheResultAndHugeCapDoesNot) {
  Problem p = make_problem(2, 70, 70, 4, 2, 16, 1600);
  pack_documents(p, 40, 1601);
  const Result none = run_both(p);
  p.softcap = 1.0f;
  const Result capped = run_both(p);
  double moved = 0;
  for (size_t i = 0; i < none.o.size(); ++i) moved = std::max(moved, std::abs(double{capped.o[i]} - none.o[i]));
  EXPECT_GT(moved, 5e-2);
  p.softcap = 1e5f;
  const Result huge = run_both(p);
  EXPECT_TRUE(all_close(huge.o, to_double(none.o), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(huge.dq, to_double(none.dq), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(huge.dk, to_double(none.dk), 1e-5, 1e-6));
}

// Ring attention's use of the kernel: a query chunk against two key blocks (an earlier chunk at offset
// positions, then its own), merged by attention_merge, and the backward of each block from the merged
// (global) o and lse accumulated: the capped full attention, with a window crossing the block boundary.
TEST_F(AttentionSoftcapTest, RingBlocksMergeToTheFullAttention) {
  const int64_t B = 2, T = 80, split = 45, NH = 4, KVH = 2, HS = 16;
  Problem full = make_problem(B, T, T, NH, KVH, HS, 1700);
  full.softcap = 0.8f;
  full.window = 20;
  Problem q_chunk = full;  // queries [split, T) only
  q_chunk.Tq = T - split;
  q_chunk.q.clear(), q_chunk.dout.clear(), q_chunk.q_pos.clear(), q_chunk.q_doc.clear();
  const int64_t qrow = NH * HS;
  for (int64_t b = 0; b < B; ++b) {
    q_chunk.q.insert(q_chunk.q.end(), full.q.begin() + (b * T + split) * qrow, full.q.begin() + (b + 1) * T * qrow);
    q_chunk.dout.insert(q_chunk.dout.end(), full.dout.begin() + (b * T + split) * qrow,
                        full.dout.begin() + (b + 1) * T * qrow);
    q_chunk.q_pos.insert(q_chunk.q_pos.end(), full.q_pos.begin() + b * T + split, full.q_pos.begin() + (b + 1) * T);
    q_chunk.q_doc.insert(q_chunk.q_doc.end(), full.q_doc.begin() + b * T + split, full.q_doc.begin() + (b + 1) * T);
  }
  const Reference want = reference(q_chunk, true);
  auto block = [&](int64_t j0, int64_t j1) {
    Problem blk = q_chunk;
    blk.Tk = j1 - j0;
    blk.k.clear(), blk.v.clear(), blk.k_pos.clear(), blk.k_doc.clear();
    const int64_t row = KVH * HS;
    for (int64_t b = 0; b < B; ++b) {
      blk.k.insert(blk.k.end(), full.k.begin() + (b * T + j0) * row, full.k.begin() + (b * T + j1) * row);
      blk.v.insert(blk.v.end(), full.v.begin() + (b * T + j0) * row, full.v.begin() + (b * T + j1) * row);
      blk.k_pos.insert(blk.k_pos.end(), full.k_pos.begin() + b * T + j0, full.k_pos.begin() + b * T + j1);
      blk.k_doc.insert(blk.k_doc.end(), full.k_doc.begin() + b * T + j0, full.k_doc.begin() + b * T + j1);
    }
    return blk;
  };
  const Problem past = block(0, split), own = block(split, T);
  Result acc = run_forward(past);
  const Result other = run_forward(own);
  trlhpc::cpu::attention_merge(acc.o.data(), acc.lse.data(), other.o.data(), other.lse.data(), B, q_chunk.Tq, NH, HS);
  expect_forward_matches(acc, want);
  Result g1, g2;
  g1.dq.assign(q_chunk.q.size(), 0.0f), g1.dk.assign(past.k.size(), 0.0f), g1.dv.assign(past.v.size(), 0.0f);
  run_backward(past, acc.o, acc.lse, g1);
  g2.dq = g1.dq;
  g2.dk.assign(own.k.size(), 0.0f), g2.dv.assign(own.v.size(), 0.0f);
  run_backward(own, acc.o, acc.lse, g2);
  Result got;
  got.dq = g2.dq;
  const int64_t row = KVH * HS;
  for (int64_t b = 0; b < B; ++b) {
    got.dk.insert(got.dk.end(), g1.dk.begin() + b * split * row, g1.dk.begin() + (b + 1) * split * row);
    got.dk.insert(got.dk.end(), g2.dk.begin() + b * (T - split) * row, g2.dk.begin() + (b + 1) * (T - split) * row);
    got.dv.insert(got.dv.end(), g1.dv.begin() + b * split * row, g1.dv.begin() + (b + 1) * split * row);
    got.dv.insert(got.dv.end(), g2.dv.begin() + b * (T - split) * row, g2.dv.begin() + (b + 1) * (T - split) * row);
  }
  expect_backward_matches(got, want);
}

// The bf16-input instantiations (--bf16) run the fp32 arithmetic on the widened inputs: with
// bf16-representable inputs, bit for bit the fp32 kernel's lse, fp32 o and gradients.
TEST_F(AttentionSoftcapTest, Bf16InputsAreTheFp32KernelOnTheWidenedInputs) {
  Problem p = make_problem(2, 100, 100, 4, 2, 16, 1800);
  pack_documents(p, 60, 1801);
  p.softcap = 1.0f;
  p.window = 30;
  auto to_bits = [](std::vector<float>& x) {  // truncates to bf16 in place, returns the bits
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      uint32_t u;
      std::memcpy(&u, &x[i], 4);
      bits[i] = static_cast<uint16_t>(u >> 16);
      u &= 0xffff0000u;
      std::memcpy(&x[i], &u, 4);
    }
    return bits;
  };
  const std::vector<uint16_t> q16 = to_bits(p.q), k16 = to_bits(p.k), v16 = to_bits(p.v), do16 = to_bits(p.dout);
  const Result want = run_both(p);
  std::vector<float> o(p.q.size()), lse(p.B * p.NH * p.Tq);
  trlhpc::cpu::attention_fwd(q16.data(), k16.data(), v16.data(), p.q_pos.data(), p.k_pos.data(), p.q_doc.data(),
                             p.k_doc.data(), o.data(), lse.data(), p.B, p.Tq, p.Tk, p.NH, p.KVH, p.HS, p.scale,
                             p.window, p.softcap);
  EXPECT_EQ(o, want.o);
  EXPECT_EQ(lse, want.lse);
  // The backward from a bf16 o: the fp32 kernel from the same (truncated) o.
  std::vector<float> o_t = want.o;
  const std::vector<uint16_t> o16 = to_bits(o_t);
  Result fp32;
  fp32.dq.assign(p.q.size(), 0.0f), fp32.dk.assign(p.k.size(), 0.0f), fp32.dv.assign(p.v.size(), 0.0f);
  run_backward(p, o_t, want.lse, fp32);
  std::vector<float> dq(p.q.size(), 0.0f), dk(p.k.size(), 0.0f), dv(p.v.size(), 0.0f);
  trlhpc::cpu::attention_bwd(q16.data(), k16.data(), v16.data(), o16.data(), want.lse.data(), do16.data(),
                             p.q_pos.data(), p.k_pos.data(), p.q_doc.data(), p.k_doc.data(), dq.data(), dk.data(),
                             dv.data(), p.B, p.Tq, p.Tk, p.NH, p.KVH, p.HS, p.scale, p.window, p.softcap);
  EXPECT_EQ(dq, fp32.dq);
  EXPECT_EQ(dk, fp32.dk);
  EXPECT_EQ(dv, fp32.dv);
}

TEST_F(AttentionSoftcapTest, RejectsNegativeOrNonFiniteCap) {
  for (float cap : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Problem p = make_problem(1, 4, 4, 2, 1, 4, 1900);
    p.softcap = cap;
    EXPECT_THROW(run_forward(p), trlhpc::UserError) << cap;
    Result r;
    r.dq.assign(p.q.size(), 0.0f), r.dk.assign(p.k.size(), 0.0f), r.dv.assign(p.v.size(), 0.0f);
    const std::vector<float> o(p.q.size(), 0.0f), lse(p.B * p.NH * p.Tq, 0.0f);
    EXPECT_THROW(run_backward(p, o, lse, r), trlhpc::UserError) << cap;
  }
}

}  // namespace
