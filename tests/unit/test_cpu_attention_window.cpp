// Sliding-window attention in kernels/cpu/attention.cpp (+ attention_bwd.cpp) against the naive double reference
// (attention_reference.hpp), whose mask is transformers' sliding_window_causal written out: a key j is
// visible to query i iff same document, pos_j <= pos_i and pos_i - pos_j < window.
//
// Windows 1 (each query sees only itself), 2, sizes around the 64-wide tiles, and longer than the row
// (then the result must equal no window bit for bit), on causal rows and on packed rows whose
// documents restart their positions; forward, backward (analytic double reference and finite
// differences), and ring-style blocks whose keys are an earlier chunk (Tq != Tk, offset positions),
// where a block entirely outside the window must contribute nothing.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using namespace trlhpc::testing::attention_reference;

class AttentionWindowTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

TEST_F(AttentionWindowTest, CausalRowsMatchReference) {
  for (int64_t window : {1, 2, 3, 17, 63, 64, 65, 129, 500}) {
    for (int64_t T : {1, 9, 130}) {
      SCOPED_TRACE("window=" + std::to_string(window) + " T=" + std::to_string(T));
      Problem p = make_problem(2, T, T, 4, 2, 16, 500 + static_cast<uint64_t>(window + T));
      p.window = window;
      expect_matches_reference(p);
    }
  }
}

TEST_F(AttentionWindowTest, PackedDocumentsMatchReference) {
  for (int64_t window : {1, 2, 5, 40, 300}) {
    for (int max_len : {3, 50, 200}) {
      SCOPED_TRACE("window=" + std::to_string(window) + " max_len=" + std::to_string(max_len));
      Problem p = make_problem(2, 150, 150, 4, 1, 8, 600 + static_cast<uint64_t>(window * 7 + max_len));
      pack_documents(p, max_len, 601 + static_cast<uint64_t>(max_len));
      p.window = window;
      expect_matches_reference(p);
    }
  }
}

// The mask really narrows: with window 1 every query attends to itself only, so o_i = v_i (its kv
// head) and lse_i = scale q_i . k_i; a window differs from no window as soon as it is shorter than the
// longest document.
TEST_F(AttentionWindowTest, WindowOneSeesOnlyItself) {
  Problem p = make_problem(1, 70, 70, 4, 2, 8, 700);
  pack_documents(p, 30, 701);
  p.window = 1;
  const Result got = run_forward(p);
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 8; ++d)
        EXPECT_NEAR(got.o[(i * 4 + h) * 8 + d], p.v[(i * 2 + h / 2) * 8 + d], 1e-6) << "i=" << i << " h=" << h;
  p.window = 0;
  const Result full = run_forward(p);
  EXPECT_NE(got.o, full.o);
}

// A window at least as long as the row masks nothing: bitwise the no-window result (the no-window
// numerics of training must not change).
TEST_F(AttentionWindowTest, WindowLongerThanRowIsBitwiseNoWindow) {
  Problem p = make_problem(2, 130, 130, 4, 2, 16, 800);
  pack_documents(p, 90, 801);
  const Result none = run_both(p);
  for (int64_t window : {int64_t{130}, int64_t{131}, int64_t{1} << 40}) {
    p.window = window;
    const Result got = run_both(p);
    EXPECT_EQ(got.o, none.o) << window;
    EXPECT_EQ(got.lse, none.lse) << window;
    EXPECT_EQ(got.dq, none.dq) << window;
    EXPECT_EQ(got.dk, none.dk) << window;
    EXPECT_EQ(got.dv, none.dv) << window;
  }
}

TEST_F(AttentionWindowTest, FiniteDifferences) {
  Problem p = make_problem(1, 9, 9, 2, 1, 4, 900);
  pack_documents(p, 6, 901);
  p.window = 2;
  const Result got = run_both(p);
  EXPECT_TRUE(all_close(got.dq, finite_difference(p, 0), 2e-5, 2e-5)) << "dq";
  EXPECT_TRUE(all_close(got.dk, finite_difference(p, 1), 2e-5, 2e-5)) << "dk";
  EXPECT_TRUE(all_close(got.dv, finite_difference(p, 2), 2e-5, 2e-5)) << "dv";
}

// Ring blocks: queries at positions [70, 103) against keys at [0, 70). With window 10 only the last
// 9 keys are visible to the first query; with window 1 nothing in this block is (a block entirely
// outside the window: o = 0, lse = -inf, no gradient).
TEST_F(AttentionWindowTest, RingBlockWithOffsetPositions) {
  Problem past = make_problem(2, 33, 70, 4, 2, 16, 1000);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 33; ++i) past.q_pos[b * 33 + i] = static_cast<int32_t>(70 + i);
  for (int64_t window : {10, 40, 80}) {
    SCOPED_TRACE("window=" + std::to_string(window));
    past.window = window;
    expect_matches_reference(past);
  }
  past.window = 1;
  const Result got = run_both(past);
  for (float x : got.lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  for (float x : got.o) EXPECT_EQ(x, 0.0f);
  for (float x : got.dq) EXPECT_EQ(x, 0.0f);
  for (float x : got.dk) EXPECT_EQ(x, 0.0f);
  for (float x : got.dv) EXPECT_EQ(x, 0.0f);
}

TEST_F(AttentionWindowTest, RejectsNegativeWindow) {
  Problem p = make_problem(1, 4, 4, 2, 1, 4, 1100);
  p.window = -1;
  EXPECT_THROW(run_forward(p), trlhpc::UserError);
  std::vector<float> o(p.q.size()), lse(8), dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  EXPECT_THROW(trlhpc::cpu::attention_bwd(p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), p.dout.data(),
                                          p.q_pos.data(), p.k_pos.data(), p.q_doc.data(), p.k_doc.data(), dq.data(),
                                          dk.data(), dv.data(), 1, 4, 4, 2, 1, 4, p.scale, -1),
               trlhpc::UserError);
}

}  // namespace
