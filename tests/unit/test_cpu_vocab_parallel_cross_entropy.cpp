// Tests of kernels/cpu/vocab_parallel_cross_entropy.cpp: splitting the vocabulary into tp = 1, 2, 3, 4
// slices and combining the per-slice statistics as the decoder's all-reduces do (max, then sums) must
// give the fused kernel's (cross_entropy.cpp) loss, dhidden (sum over slices of dz W_slice) and
// dweight (the slices' rows), with ignored targets and large logits. Bound: relative 1e-5 on the loss,
// absolute 1e-6 (of gradients of size ~1e-2) elementwise. The same with label smoothing and DFT
// (token_loss.hpp), with and without a logit softcap, at the same bounds (see that test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::random_floats;

struct Result {
  double loss = 0;
  std::vector<float> dhidden, dweight;
};

using trlhpc::TokenLoss;

Result fused(const std::vector<float>& h, const std::vector<float>& w, const std::vector<int32_t>& y, int64_t N,
             int64_t C, int64_t V, float scale, const TokenLoss& loss = {}, float cap = 0.0f) {
  Result r{0, std::vector<float>(N * C), std::vector<float>(V * C, 0.0f)};
  r.loss = trlhpc::cpu::cross_entropy_fwd_bwd(h.data(), w.data(), y.data(), N, C, V, scale, r.dhidden.data(),
                                              r.dweight.data(), 5, nullptr, nullptr, false, cap, loss);
  return r;
}

// The decoder's vocab-parallel sequence (src/model/decoder_tensor_parallel.cpp), with the all-reduces
// done by loops over the slices.
Result split(const std::vector<float>& h, const std::vector<float>& w, const std::vector<int32_t>& y, int64_t N,
             int64_t C, int64_t V, float scale, int tp, const TokenLoss& loss = {}, float cap = 0.0f) {
  namespace cpu = trlhpc::cpu;
  const int64_t Vl = V / tp;
  std::vector<std::vector<float>> z(tp, std::vector<float>(N * Vl));
  std::vector<float> m(N, -INFINITY), sums(2 * N, 0.0f), logit_sums(N, 0.0f);
  for (int r = 0; r < tp; ++r) {
    cpu::matmul(h.data(), false, w.data() + r * Vl * C, true, z[r].data(), N, Vl, C, 1.0f, 0.0f);
    if (cap > 0) cpu::logit_softcap(z[r].data(), N * Vl, cap);
    std::vector<float> mr(N);
    cpu::vocab_parallel_ce_max(z[r].data(), N, Vl, mr.data());
    for (int64_t t = 0; t < N; ++t) m[t] = std::max(m[t], mr[t]);  // all-reduce max
  }
  for (int r = 0; r < tp; ++r) {
    std::vector<float> sr(2 * N);
    cpu::vocab_parallel_ce_sums(z[r].data(), y.data(), N, Vl, r * Vl, m.data(), sr.data());
    for (int64_t i = 0; i < 2 * N; ++i) sums[i] += sr[i];  // all-reduce sum
    if (loss.label_smoothing > 0) {
      std::vector<float> lr(N);
      cpu::vocab_parallel_ce_logit_sums(z[r].data(), y.data(), N, Vl, lr.data());
      for (int64_t t = 0; t < N; ++t) logit_sums[t] += lr[t];  // all-reduce sum
    }
  }
  Result out{0, std::vector<float>(N * C, 0.0f), std::vector<float>(V * C, 0.0f)};
  for (int64_t t = 0; t < N; ++t)
    if (y[t] != -100)
      out.loss += trlhpc::token_loss_from_statistics(m[t] + std::log(static_cast<double>(sums[2 * t])),
                                                     sums[2 * t + 1], static_cast<double>(logit_sums[t]) / V, loss);
  for (int r = 0; r < tp; ++r) {
    if (loss.plain())
      cpu::vocab_parallel_ce_grad(z[r].data(), y.data(), N, Vl, r * Vl, m.data(), sums.data(), scale, cap);
    else
      cpu::vocab_parallel_ce_shaped_grad(z[r].data(), y.data(), N, Vl, r * Vl, V, m.data(), sums.data(), scale, cap,
                                         loss);
    std::vector<float> dh(N * C);
    cpu::matmul(z[r].data(), false, w.data() + r * Vl * C, false, dh.data(), N, C, Vl, 1.0f, 0.0f);
    for (int64_t i = 0; i < N * C; ++i) out.dhidden[i] += dh[i];  // all-reduce sum
    cpu::matmul(z[r].data(), true, h.data(), false, out.dweight.data() + r * Vl * C, Vl, C, N, 1.0f, 1.0f);
  }
  return out;
}

double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

TEST(CpuVocabParallelCrossEntropy, SlicesCombineToTheFusedKernel) {
  const int64_t N = 13, C = 16, V = 96;
  for (float logit_scale : {1.0f, 30.0f}) {
    const std::vector<float> h = random_floats(N * C, 3, logit_scale), w = random_floats(V * C, 4);
    std::vector<int32_t> y;
    std::mt19937 gen(5);
    for (int64_t t = 0; t < N; ++t) y.push_back(t % 4 == 0 ? -100 : static_cast<int32_t>(gen() % V));
    const float scale = 1.0f / 9.0f;
    const Result want = fused(h, w, y, N, C, V, scale);
    for (int tp : {1, 2, 3, 4}) {
      const Result got = split(h, w, y, N, C, V, scale, tp);
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss)) << "tp " << tp << " scale " << logit_scale;
      EXPECT_LT(worst(got.dhidden, want.dhidden), 1e-6 * logit_scale) << "tp " << tp;
      EXPECT_LT(worst(got.dweight, want.dweight), 1e-6 * logit_scale) << "tp " << tp;
    }
  }
}

// Label smoothing (eps 0.1), DFT, and both (the kernels allow it, trlhpc sft does not build it), with
// and without a logit softcap (3, where tanh bends for these logits), on 2 and 3 slices (and 1, 4):
// the fused kernel's loss and gradients at the plain test's bounds. Nothing here is looser: the slices
// take the same double sums as the plain path (fp32 exp_approx there, double exp here, as before) and
// the shaping is one more multiply per element. Each loss must differ from the plain one by far more
// than the bound, so a split path that ignored the TokenLoss could not pass.
TEST(CpuVocabParallelCrossEntropy, SmoothedAndDftSlicesCombineToTheFusedKernel) {
  const int64_t N = 13, C = 16, V = 96;
  const float scale = 1.0f / 9.0f;
  for (float logit_scale : {1.0f, 30.0f}) {
    const std::vector<float> h = random_floats(N * C, 3, logit_scale), w = random_floats(V * C, 4);
    std::vector<int32_t> y;
    std::mt19937 gen(5);
    for (int64_t t = 0; t < N; ++t) y.push_back(t % 4 == 0 ? -100 : static_cast<int32_t>(gen() % V));
    for (const TokenLoss loss : {TokenLoss{0.1f, false}, TokenLoss{0.0f, true}, TokenLoss{0.3f, true}})
      for (const float cap : {0.0f, 3.0f}) {
        SCOPED_TRACE(::testing::Message() << "eps " << loss.label_smoothing << " dft " << loss.dft << " cap " << cap
                                          << " logit scale " << logit_scale);
        const Result plain = fused(h, w, y, N, C, V, scale, {}, cap);
        const Result want = fused(h, w, y, N, C, V, scale, loss, cap);
        ASSERT_GT(std::abs(want.loss - plain.loss), 1e-3 * std::abs(want.loss));
        for (int tp : {1, 2, 3, 4}) {
          const Result got = split(h, w, y, N, C, V, scale, tp, loss, cap);
          EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::abs(want.loss)) << "tp " << tp;
          EXPECT_LT(worst(got.dhidden, want.dhidden), 1e-6 * logit_scale) << "tp " << tp;
          EXPECT_LT(worst(got.dweight, want.dweight), 1e-6 * logit_scale) << "tp " << tp;
        }
      }
  }
}

// The shaped gradient of one row split over two slices, by hand: eps / V (the whole vocabulary, not
// the slice) leaves every entry of both slices, the (1 - eps) onehot only the owning slice's, and DFT
// scales the row by p_y; ignored rows stay zero.
TEST(CpuVocabParallelCrossEntropy, ShapedGradientSpreadsEpsOverTheWholeVocabulary) {
  namespace cpu = trlhpc::cpu;
  const std::vector<float> row = {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, -0.5f};  // V 6 as slices of 3
  const std::vector<int32_t> y = {4, -100};                              // target in slice 1
  double s = 0;
  for (float v : row) s += std::exp(static_cast<double>(v) - 2.0);
  const std::vector<float> m = {2.0f, 0.0f}, sums = {static_cast<float>(s), row[4], 0.0f, 0.0f};
  for (const TokenLoss loss : {TokenLoss{0.2f, false}, TokenLoss{0.0f, true}}) {
    const double w = loss.dft ? std::exp(row[4] - 2.0) / s : 1.0, eps = loss.label_smoothing;
    for (int slice = 0; slice < 2; ++slice) {
      std::vector<float> z(row.begin() + 3 * slice, row.begin() + 3 * slice + 3);
      z.insert(z.end(), {7.0f, 8.0f, 9.0f});  // the ignored row
      cpu::vocab_parallel_ce_shaped_grad(z.data(), y.data(), 2, 3, 3 * slice, 6, m.data(), sums.data(), 0.5f, 0.0f,
                                         loss);
      for (int v = 0; v < 3; ++v) {
        const int id = 3 * slice + v;
        const double want =
            0.5 * w * (std::exp(static_cast<double>(row[id]) - 2.0) / s - (id == 4 ? 1.0 - eps : 0.0) - eps / 6);
        EXPECT_NEAR(z[v], want, 1e-7) << "id " << id << " eps " << eps << " dft " << loss.dft;
        EXPECT_EQ(z[3 + v], 0.0f);
      }
    }
  }
}

TEST(CpuVocabParallelCrossEntropy, IgnoredRowsGiveZerosAndTargetsOutsideTheSliceNoTargetLogit) {
  const int64_t V = 4;
  std::vector<float> z = {1, 2, 3, 4, 5, 6, 7, 8};  // (2, 4)
  const std::vector<int32_t> y = {-100, 9};          // row 1's target belongs to another slice
  std::vector<float> m(2), sums(4);
  trlhpc::cpu::vocab_parallel_ce_max(z.data(), 2, V, m.data());
  EXPECT_EQ(m[1], 8.0f);
  trlhpc::cpu::vocab_parallel_ce_sums(z.data(), y.data(), 2, V, 4, m.data(), sums.data());
  EXPECT_EQ(sums[0], 0.0f);
  EXPECT_EQ(sums[1], 0.0f);
  EXPECT_EQ(sums[3], 0.0f);
  trlhpc::cpu::vocab_parallel_ce_grad(z.data(), y.data(), 2, V, 4, m.data(), sums.data(), 1.0f);
  for (int v = 0; v < 4; ++v) EXPECT_EQ(z[v], 0.0f);
  EXPECT_NEAR(z[4] + z[5] + z[6] + z[7], 1.0f, 1e-6);  // whole softmax mass, no onehot subtracted here
}

// TRL's metrics on vocabulary slices, combined as the decoder does (column 0 summed, column 1 min),
// equal the fused kernel's: the same top-1 count (including a target tied with an earlier maximum in
// another slice) and the entropy within 1e-5 per token (double sums here, fp32 there).
TEST(CpuVocabParallelCrossEntropy, TrlMetricsCombineToTheFusedKernels) {
  namespace cpu = trlhpc::cpu;
  const int64_t N = 13, C = 16, V = 96;
  std::vector<float> h = random_floats(N * C, 7), w = random_floats(V * C, 8);
  std::copy(w.begin() + 5 * C, w.begin() + 6 * C, w.begin() + 70 * C);  // vocab rows 5 and 70 tie everywhere
  std::vector<int32_t> y;
  std::mt19937 gen(9);
  for (int64_t t = 0; t < N; ++t) y.push_back(t % 4 == 0 ? -100 : static_cast<int32_t>(gen() % V));
  // Some targets at the argmax: rows 1, 2 get theirs; row 3 gets the later of the tied pair if it wins.
  for (int64_t t : {1, 2, 3}) {
    std::vector<float> z(V);
    cpu::matmul(h.data() + t * C, false, w.data(), true, z.data(), 1, V, C, 1.0f, 0.0f);
    y[t] = static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
  }
  cpu::CrossEntropyMetrics want;
  std::vector<float> dh(N * C), dw(V * C, 0.0f);
  cpu::cross_entropy_fwd_bwd(h.data(), w.data(), y.data(), N, C, V, 1.0f, dh.data(), dw.data(), 5, nullptr, &want);
  ASSERT_GT(want.top1, 0);
  for (int tp : {1, 2, 3, 4}) {
    const int64_t Vl = V / tp;
    std::vector<std::vector<float>> z(tp, std::vector<float>(N * Vl));
    std::vector<float> m(N, -INFINITY), s(N, 0.0f), weighted(N, 0.0f), first(N, static_cast<float>(V));
    for (int r = 0; r < tp; ++r) {
      cpu::matmul(h.data(), false, w.data() + r * Vl * C, true, z[r].data(), N, Vl, C, 1.0f, 0.0f);
      std::vector<float> mr(N);
      cpu::vocab_parallel_ce_max(z[r].data(), N, Vl, mr.data());
      for (int64_t t = 0; t < N; ++t) m[t] = std::max(m[t], mr[t]);
    }
    for (int r = 0; r < tp; ++r) {
      std::vector<float> sums(2 * N), stats(2 * N);
      cpu::vocab_parallel_ce_sums(z[r].data(), y.data(), N, Vl, r * Vl, m.data(), sums.data());
      cpu::vocab_parallel_ce_metrics(z[r].data(), y.data(), N, Vl, r * Vl, V, m.data(), stats.data());
      for (int64_t t = 0; t < N; ++t) {
        s[t] += sums[2 * t];
        weighted[t] += stats[2 * t];
        first[t] = std::min(first[t], stats[2 * t + 1]);
      }
    }
    double entropy = 0;
    int64_t top1 = 0;
    for (int64_t t = 0; t < N; ++t) {
      if (y[t] == -100) continue;
      entropy += std::log(static_cast<double>(s[t])) - static_cast<double>(weighted[t]) / s[t];
      top1 += static_cast<int64_t>(first[t]) == y[t];
    }
    EXPECT_EQ(top1, want.top1) << "tp " << tp;
    EXPECT_NEAR(entropy, want.entropy_sum, 1e-5 * N) << "tp " << tp;
  }
}

}  // namespace
