// Final-logit softcapping (Gemma 2's final_logit_softcapping) on the CPU: the vectorised tanh of
// kernels/cpu/softcap.hpp against std::tanh, the fused LM head + cross-entropy (cross_entropy.cpp) with a
// cap against a double reference built on transformers' order (logits = h W^T, then cap tanh(z / cap),
// then the loss and TRL's metrics on the capped logits; the backward through 1 - tanh^2, itself checked
// by finite differences), and the vocab-parallel pieces (cap in place, then max / sums / metrics / grad
// with the cap) combining over 1..4 slices to the fused kernel.
//
// Logits here have standard deviation ~1.2 (h uniform in [-2, 2], W uniform in [-1, 1], C 8) and the
// caps are 1 and 3, so a large share of the logits lie where tanh bends (counted below).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
namespace cpu = trlhpc::cpu;

class LogitSoftcapTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

// cap tanh(x / cap) within 3 ulp of the exact value, over [-60, 60] and beyond; at 0 exactly 0. Bound:
// tanh_approx is within 1.2 ulp of tanh (softcap.hpp), which can be up to 2.4 ulp of the product when
// multiplying by the cap moves it into a binade of half the relative ulp, plus the product's rounding.
TEST_F(LogitSoftcapTest, TanhIsWithinThreeUlp) {
  for (float cap : {1.0f, 3.0f, 30.0f}) {
    std::vector<float> x;
    for (double v = -60.0; v <= 60.0; v += 1.0 / 1024) x.push_back(static_cast<float>(v * cap / 4));
    for (float big : {1e3f, 1e30f, std::numeric_limits<float>::infinity()}) x.push_back(big), x.push_back(-big);
    std::vector<float> y = x;
    cpu::logit_softcap(y.data(), static_cast<int64_t>(y.size()), cap);
    double worst_ulp = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      // The exact c tanh(x / c) of the fp32 quotient (the kernel divides in fp32 as transformers does).
      const float quotient = x[i] / cap;
      const double want = static_cast<double>(cap) * std::tanh(static_cast<double>(quotient));
      const float want_f = static_cast<float>(want);
      const double ulp = std::nextafter(std::abs(want_f), std::numeric_limits<float>::infinity()) - std::abs(want_f);
      if (want == 0) {
        EXPECT_EQ(y[i], 0.0f) << x[i];
        continue;
      }
      worst_ulp = std::max(worst_ulp, std::abs(y[i] - want) / ulp);
    }
    EXPECT_LE(worst_ulp, 3.0) << "cap " << cap;
    std::printf("[ measured ] cap %.0f: softcap within %.2f ulp of cap * tanh(x / cap)\n", cap, worst_ulp);
  }
  std::vector<float> bad = {1.0f};
  EXPECT_THROW(cpu::logit_softcap(bad.data(), 1, 0.0f), trlhpc::UserError);
  EXPECT_THROW(cpu::logit_softcap(bad.data(), 1, -2.0f), trlhpc::UserError);
}

struct Problem {
  int64_t N, C, V;
  std::vector<float> hidden, weight;  // (N, C), (V, C)
  std::vector<int32_t> targets;       // (N), -100 = ignore
};

Problem make_problem(int64_t N, int64_t C, int64_t V, uint64_t seed) {
  Problem p{N, C, V, random_floats(N * C, seed, 2.0f), random_floats(V * C, seed + 1), {}};
  std::mt19937 gen(static_cast<uint32_t>(seed));
  for (int64_t t = 0; t < N; ++t)
    p.targets.push_back(t == 0 || gen() % 4 == 0 ? -100 : static_cast<int32_t>(gen() % static_cast<uint32_t>(V)));
  return p;
}

struct Reference {
  double loss = 0, entropy = 0;
  int64_t top1 = 0, beyond_half_cap = 0, logits = 0;
  std::vector<double> dhidden, dweight;
};

// transformers' order in double: z = h W^T, capped = cap tanh(z / cap), loss = lse(capped) - capped[y],
// d loss / dz = grad_scale (softmax(capped) - onehot) (1 - tanh^2). TRL's metrics on the capped logits;
// top-1 ties decided on the fp32 kernel's values (none occur below saturation at these sizes).
Reference reference(const Problem& p, const std::vector<double>& h, const std::vector<double>& w, double scale,
                    double cap) {
  Reference r;
  r.dhidden.assign(p.N * p.C, 0.0), r.dweight.assign(p.V * p.C, 0.0);
  std::vector<double> z(p.V), t(p.V);
  for (int64_t n = 0; n < p.N; ++n) {
    if (p.targets[n] == -100) continue;
    for (int64_t v = 0; v < p.V; ++v) {
      double dot = 0;
      for (int64_t c = 0; c < p.C; ++c) dot += h[n * p.C + c] * w[v * p.C + c];
      r.beyond_half_cap += std::abs(dot) > 0.5 * cap, ++r.logits;
      t[v] = std::tanh(dot / cap), z[v] = cap * t[v];
    }
    const int64_t first = std::max_element(z.begin(), z.end()) - z.begin();
    r.top1 += first == p.targets[n];
    double sum = 0;
    for (int64_t v = 0; v < p.V; ++v) sum += std::exp(z[v] - z[first]);
    r.loss += z[first] + std::log(sum) - z[p.targets[n]];
    for (int64_t v = 0; v < p.V; ++v) {
      const double prob = std::exp(z[v] - z[first]) / sum;
      r.entropy -= prob * std::log(prob);
      const double dz = scale * (prob - (v == p.targets[n] ? 1.0 : 0.0)) * (1.0 - t[v] * t[v]);
      for (int64_t c = 0; c < p.C; ++c) {
        r.dhidden[n * p.C + c] += dz * w[v * p.C + c];
        r.dweight[v * p.C + c] += dz * h[n * p.C + c];
      }
    }
  }
  return r;
}

Reference reference(const Problem& p, double scale, double cap) {
  return reference(p, {p.hidden.begin(), p.hidden.end()}, {p.weight.begin(), p.weight.end()}, scale, cap);
}

struct Result {
  double loss = 0;
  cpu::CrossEntropyMetrics metrics;
  std::vector<float> dhidden, dweight;
};

Result fused(const Problem& p, float scale, float cap, int64_t chunk, bool bf16_gemm = false) {
  Result r;
  r.dhidden.assign(p.N * p.C, std::numeric_limits<float>::quiet_NaN()), r.dweight.assign(p.V * p.C, 0.0f);
  r.loss = cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(), p.N, p.C, p.V, scale,
                                      r.dhidden.data(), r.dweight.data(), chunk, nullptr, &r.metrics, bf16_gemm, cap);
  return r;
}

// Tolerances as test_cpu_cross_entropy.cpp reasons them (fp32 logits, double sums): loss 1e-5 per token,
// gradients 1e-5 relative + 1e-6 absolute, entropy 1e-4 per token; top-1 exact.
TEST_F(LogitSoftcapTest, FusedLossMatchesTheCappedReferenceForEveryChunking) {
  for (float cap : {1.0f, 3.0f}) {
    const Problem p = make_problem(29, 8, 77, 70);
    const float scale = 1.0f / 21.0f;
    const Reference want = reference(p, scale, cap);
    const double share = static_cast<double>(want.beyond_half_cap) / static_cast<double>(want.logits);
    std::printf("[ measured ] cap %.0f: %.2f of the logits beyond half the cap\n", cap, share);
    EXPECT_GT(share, 0.2);
    for (int64_t chunk : {int64_t{1}, int64_t{4}, int64_t{64}}) {
      SCOPED_TRACE(::testing::Message() << "cap " << cap << " chunk " << chunk);
      const Result got = fused(p, scale, cap, chunk);
      const double valid = static_cast<double>(p.N);  // an upper bound on the valid count
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * valid);
      EXPECT_TRUE(all_close(got.dhidden, want.dhidden, 1e-5, 1e-6)) << "dhidden";
      EXPECT_TRUE(all_close(got.dweight, want.dweight, 1e-5, 1e-6)) << "dweight";
      EXPECT_NEAR(got.metrics.entropy_sum, want.entropy, 1e-4 * valid);
      EXPECT_EQ(got.metrics.top1, want.top1);
    }
    // The cap is in effect: the uncapped loss is another number.
    const Result uncapped = fused(p, scale, 0.0f, 64);
    EXPECT_GT(std::abs(uncapped.loss - want.loss), 0.05 * want.loss);
  }
}

// The reference's backward (through 1 - tanh^2) against central differences of its loss, so that the
// kernel is held to a derivative that is right, not only to a formula.
TEST_F(LogitSoftcapTest, ReferenceGradientsMatchFiniteDifferences) {
  const Problem p = make_problem(6, 5, 13, 80);
  const double scale = 0.5, cap = 1.0;
  std::vector<double> h(p.hidden.begin(), p.hidden.end()), w(p.weight.begin(), p.weight.end());
  const Reference want = reference(p, h, w, scale, cap);
  auto fd = [&](std::vector<double>& x) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double step = 1e-5, x0 = x[i];
      x[i] = x0 + step;
      const double up = reference(p, h, w, scale, cap).loss;
      x[i] = x0 - step;
      g[i] = scale * (up - reference(p, h, w, scale, cap).loss) / (2 * step);
      x[i] = x0;
    }
    return g;
  };
  const std::vector<double> dh = fd(h), dw = fd(w);
  for (size_t i = 0; i < dh.size(); ++i) EXPECT_NEAR(want.dhidden[i], dh[i], 1e-8) << "dhidden " << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(want.dweight[i], dw[i], 1e-8) << "dweight " << i;
  const Result got = fused(p, static_cast<float>(scale), static_cast<float>(cap), 2);
  EXPECT_TRUE(all_close(got.dhidden, dh, 1e-5, 1e-6)) << "kernel dhidden vs finite differences";
  EXPECT_TRUE(all_close(got.dweight, dw, 1e-5, 1e-6)) << "kernel dweight vs finite differences";
}

// The decoder's vocab-parallel sequence with the cap (decoder_tensor_parallel.cpp): each slice capped in
// place, then max / sums / metrics all-reduced by loops, the gradient with the cap. Bound: the slices
// recover tanh from the capped value (z / c), a rounding the fused kernel does not make: 1e-6 absolute
// on gradients of size ~5e-2, 1e-5 relative on the loss and the entropy.
TEST_F(LogitSoftcapTest, VocabParallelSlicesCombineToTheFusedKernel) {
  const Problem p = make_problem(13, 8, 96, 90);
  const int64_t N = p.N, C = p.C, V = p.V;
  const float scale = 1.0f / 9.0f, cap = 1.5f;
  const Result want = fused(p, scale, cap, 5);
  for (int tp : {1, 2, 3, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    const int64_t Vl = V / tp;
    std::vector<std::vector<float>> z(tp, std::vector<float>(N * Vl));
    std::vector<float> m(N, -INFINITY), sums(2 * N, 0.0f), stats(2 * N, 0.0f);
    std::vector<float> first(N, static_cast<float>(V));
    for (int r = 0; r < tp; ++r) {
      cpu::matmul(p.hidden.data(), false, p.weight.data() + r * Vl * C, true, z[r].data(), N, Vl, C, 1.0f, 0.0f);
      cpu::logit_softcap(z[r].data(), N * Vl, cap);
      std::vector<float> mr(N);
      cpu::vocab_parallel_ce_max(z[r].data(), N, Vl, mr.data());
      for (int64_t t = 0; t < N; ++t) m[t] = std::max(m[t], mr[t]);
    }
    for (int r = 0; r < tp; ++r) {
      std::vector<float> sr(2 * N), st(2 * N);
      cpu::vocab_parallel_ce_sums(z[r].data(), p.targets.data(), N, Vl, r * Vl, m.data(), sr.data());
      cpu::vocab_parallel_ce_metrics(z[r].data(), p.targets.data(), N, Vl, r * Vl, V, m.data(), st.data());
      for (int64_t t = 0; t < N; ++t) {
        sums[2 * t] += sr[2 * t], sums[2 * t + 1] += sr[2 * t + 1];
        stats[2 * t] += st[2 * t], first[t] = std::min(first[t], st[2 * t + 1]);
      }
    }
    double loss = 0, entropy = 0;
    int64_t top1 = 0;
    for (int64_t t = 0; t < N; ++t) {
      if (p.targets[t] == -100) continue;
      const double s = sums[2 * t];
      loss += m[t] + std::log(s) - sums[2 * t + 1];
      entropy += std::log(s) - stats[2 * t] / s;
      top1 += static_cast<int32_t>(first[t]) == p.targets[t];
    }
    EXPECT_NEAR(loss, want.loss, 1e-5 * want.loss);
    EXPECT_NEAR(entropy, want.metrics.entropy_sum, 1e-5 * want.metrics.entropy_sum);
    EXPECT_EQ(top1, want.metrics.top1);
    std::vector<float> dh(N * C, 0.0f), dw(V * C, 0.0f);
    for (int r = 0; r < tp; ++r) {
      cpu::vocab_parallel_ce_grad(z[r].data(), p.targets.data(), N, Vl, r * Vl, m.data(), sums.data(), scale, cap);
      std::vector<float> part(N * C);
      cpu::matmul(z[r].data(), false, p.weight.data() + r * Vl * C, false, part.data(), N, C, Vl, 1.0f, 0.0f);
      for (int64_t i = 0; i < N * C; ++i) dh[i] += part[i];
      cpu::matmul(z[r].data(), true, p.hidden.data(), false, dw.data() + r * Vl * C, Vl, C, N, 1.0f, 1.0f);
    }
    EXPECT_TRUE(all_close(dh, std::vector<double>(want.dhidden.begin(), want.dhidden.end()), 0, 1e-6)) << "dhidden";
    EXPECT_TRUE(all_close(dw, std::vector<double>(want.dweight.begin(), want.dweight.end()), 0, 1e-6)) << "dweight";
  }
}

// Through the Ops seam (what the decoder calls): logit_softcap on a tensor and the fused loss with the cap
// are the kernels' results, under a BF16 compute dtype too (its GEMMs bf16, the cap and softmax fp32:
// within bf16 rounding of the fp32 loss, and not the uncapped one).
TEST_F(LogitSoftcapTest, OpsSeamCapsTheLogitsAndTheLoss) {
  const Problem p = make_problem(11, 8, 40, 100);
  const float cap = 2.0f, scale = 0.25f;
  const Result want = fused(p, scale, cap, 3);
  for (trlhpc::DType compute : {trlhpc::DType::F32, trlhpc::DType::BF16}) {
    auto ops = trlhpc::make_cpu_ops(compute);
    auto put = [&](const std::vector<float>& x, trlhpc::Shape shape) {
      trlhpc::Tensor t = ops->allocate(shape);
      ops->copy_from_host(t, x.data(), x.size() * sizeof(float));
      return t;
    };
    const trlhpc::Tensor h = put(p.hidden, {p.N, p.C}), w = put(p.weight, {p.V, p.C});
    trlhpc::Tensor y = ops->allocate({p.N}, trlhpc::DType::I32);
    ops->copy_from_host(y, p.targets.data(), p.targets.size() * sizeof(int32_t));
    const trlhpc::Tensor dh = ops->allocate({p.N, p.C}), dw = ops->zeros({p.V, p.C});
    int64_t valid = 0;
    trlhpc::TokenMetrics metrics;
    const double loss = ops->cross_entropy_fwd_bwd(h, w, y, scale, dh, dw, 3, &valid, &metrics, nullptr, cap);
    if (compute == trlhpc::DType::F32) {
      EXPECT_EQ(loss, want.loss);
      EXPECT_EQ(metrics.top1, want.metrics.top1);
      std::vector<float> got(p.N * p.C);
      ops->copy_to_host(got.data(), dh, got.size() * sizeof(float));
      EXPECT_EQ(got, want.dhidden);
    } else {
      EXPECT_NEAR(loss, want.loss, 1e-2 * want.loss);
      EXPECT_NE(loss, want.loss);
    }
    EXPECT_GT(std::abs(loss - fused(p, scale, 0.0f, 3).loss), 0.05 * want.loss);
  }
  auto ops = trlhpc::make_cpu_ops();
  std::vector<float> x = {-100.0f, -1.0f, 0.0f, 0.5f, 3.0f, 100.0f}, want_x = x;  // +-100: saturated to +-cap
  cpu::logit_softcap(want_x.data(), static_cast<int64_t>(want_x.size()), cap);
  trlhpc::Tensor t = ops->allocate({6});
  ops->copy_from_host(t, x.data(), x.size() * sizeof(float));
  ops->logit_softcap(t, cap);
  std::vector<float> got(6);
  ops->copy_to_host(got.data(), t, got.size() * sizeof(float));
  EXPECT_EQ(got, want_x);
  EXPECT_NEAR(got[5], cap, 1e-6);
  EXPECT_NEAR(got[0], -cap, 1e-6);
}

}  // namespace
