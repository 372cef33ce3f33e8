// Tests of kernels/cpu/cross_entropy.cpp (fused LM head + cross-entropy) against a naive reference that
// builds the full (N, V) logits in double: loss sum, valid-token count, dhidden (overwrite, zero rows for
// ignored tokens) and dweight (accumulate), for chunk sizes 1, 3, not dividing N and larger than N,
// targets with -100, large logits (log-sum-exp stability), and central finite differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Problem {
  int64_t N, C, V;
  std::vector<float> hidden, weight;  // (N, C), (V, C)
  std::vector<int32_t> targets;       // (N), -100 = ignore
};

// About a third of the targets ignored, including the first token (as a masked prompt would be).
Problem make_problem(int64_t N, int64_t C, int64_t V, float logit_scale, uint64_t seed) {
  Problem p{N, C, V, random_floats(N * C, seed, logit_scale), random_floats(V * C, seed + 1), {}};
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> target(0, static_cast<int32_t>(V - 1));
  for (int64_t t = 0; t < N; ++t) p.targets.push_back(t == 0 || gen() % 3 == 0 ? -100 : target(gen));
  return p;
}

struct Reference {
  double loss = 0;
  int64_t valid = 0;
  std::vector<double> dhidden, dweight;
};

// Full logits in double; gradients of grad_scale * sum loss.
Reference reference(const Problem& p, const std::vector<double>& hidden, const std::vector<double>& weight,
                    double grad_scale) {
  Reference r;
  r.dhidden.assign(p.N * p.C, 0.0), r.dweight.assign(p.V * p.C, 0.0);
  std::vector<double> z(p.V);
  for (int64_t t = 0; t < p.N; ++t) {
    if (p.targets[t] == -100) continue;
    ++r.valid;
    double zmax = -INFINITY;
    for (int64_t v = 0; v < p.V; ++v) {
      z[v] = 0;
      for (int64_t c = 0; c < p.C; ++c) z[v] += hidden[t * p.C + c] * weight[v * p.C + c];
      zmax = std::max(zmax, z[v]);
    }
    double sum = 0;
    for (int64_t v = 0; v < p.V; ++v) sum += std::exp(z[v] - zmax);
    r.loss += zmax + std::log(sum) - z[p.targets[t]];
    for (int64_t v = 0; v < p.V; ++v) {
      const double dz = grad_scale * (std::exp(z[v] - zmax) / sum - (v == p.targets[t] ? 1.0 : 0.0));
      for (int64_t c = 0; c < p.C; ++c) {
        r.dhidden[t * p.C + c] += dz * weight[v * p.C + c];
        r.dweight[v * p.C + c] += dz * hidden[t * p.C + c];
      }
    }
  }
  return r;
}

Reference reference(const Problem& p, double grad_scale) {
  return reference(p, {p.hidden.begin(), p.hidden.end()}, {p.weight.begin(), p.weight.end()}, grad_scale);
}

struct Result {
  double loss;
  int64_t valid;
  std::vector<float> dhidden, dweight;
};

// dhidden poisoned with NaN (it is overwritten), dweight starts from `dweight0` (it accumulates).
Result run(const Problem& p, float grad_scale, int64_t chunk, const std::vector<float>& dweight0) {
  Result r{0, -1, std::vector<float>(p.N * p.C, kNaN), dweight0};
  r.loss = trlhpc::cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(), p.N, p.C, p.V,
                                              grad_scale, r.dhidden.data(), r.dweight.data(), chunk, &r.valid);
  return r;
}

class CrossEntropyTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

// Loss: fp32 logits (C-term dot products, ~1e-7 relative) feed a double log-sum-exp, so the per-token
// loss is good to ~1e-6 absolute; summed over N tokens, 1e-5 * N absolute. Gradients: softmax in fp32
// and sgemm sums over V (dhidden) or N (dweight) terms of size ~grad_scale: 1e-5 relative + 1e-6 abs.
TEST_F(CrossEntropyTest, MatchesFullLogitsReferenceForEveryChunking) {
  for (auto [N, C, V] : {std::tuple{1, 8, 5}, std::tuple{7, 9, 37}, std::tuple{33, 16, 100}}) {
    const Problem p = make_problem(N, C, V, 1.0f, 10 + N);
    const float grad_scale = 1.0f / static_cast<float>(N);
    const Reference want = reference(p, grad_scale);
    const std::vector<float> dweight0 = random_floats(V * C, 3);
    std::vector<double> dweight_want = want.dweight;
    for (size_t i = 0; i < dweight_want.size(); ++i) dweight_want[i] += dweight0[i];
    for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{N + 5}}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " V=" << V << " chunk=" << chunk);
      const Result got = run(p, grad_scale, chunk, dweight0);
      EXPECT_NEAR(got.loss, want.loss, 1e-5 * N);
      EXPECT_EQ(got.valid, want.valid);
      EXPECT_TRUE(all_close(got.dhidden, want.dhidden, 1e-5, 1e-6)) << "dhidden";
      EXPECT_TRUE(all_close(got.dweight, dweight_want, 1e-5, 1e-6)) << "dweight";
    }
  }
}

// Logits of size ~+-100: exp would overflow in fp32 without subtracting the row max.
TEST_F(CrossEntropyTest, LargeLogitsAreStable) {
  const Problem p = make_problem(13, 8, 50, 10.0f, 20);
  const Reference want = reference(p, 1.0);
  const Result got = run(p, 1.0f, 4, std::vector<float>(50 * 8, 0.0f));
  // Logits of size 100 carry ~1e-5 absolute fp32 error, which passes straight into each loss_t.
  EXPECT_NEAR(got.loss, want.loss, 1e-4 * 13);
  EXPECT_TRUE(all_close(got.dhidden, want.dhidden, 1e-4, 1e-5)) << "dhidden";
  EXPECT_TRUE(all_close(got.dweight, want.dweight, 1e-4, 1e-5)) << "dweight";
}

// Central differences of grad_scale * loss in double through the reference, step 1e-5: truncation
// ~h^2 = 1e-10, rounding ~1e-16 |L| / h ~ 1e-10, so FD is exact to ~1e-9 and the tolerance is the
// kernel's fp32 error. The analytic double reference is held to the FD tightly as well.
TEST_F(CrossEntropyTest, GradientsMatchFiniteDifferences) {
  const Problem p = make_problem(7, 5, 11, 1.0f, 30);
  const double grad_scale = 0.5;
  std::vector<double> hidden(p.hidden.begin(), p.hidden.end()), weight(p.weight.begin(), p.weight.end());
  auto fd = [&](std::vector<double>& x) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double h = 1e-5, x0 = x[i];
      x[i] = x0 + h;
      const double up = reference(p, hidden, weight, grad_scale).loss;
      x[i] = x0 - h;
      g[i] = grad_scale * (up - reference(p, hidden, weight, grad_scale).loss) / (2 * h);
      x[i] = x0;
    }
    return g;
  };
  const std::vector<double> dh_fd = fd(hidden), dw_fd = fd(weight);
  const Result got = run(p, static_cast<float>(grad_scale), 3, std::vector<float>(p.V * p.C, 0.0f));
  EXPECT_TRUE(all_close(got.dhidden, dh_fd, 1e-5, 1e-6)) << "dhidden vs finite differences";
  EXPECT_TRUE(all_close(got.dweight, dw_fd, 1e-5, 1e-6)) << "dweight vs finite differences";
  const Reference want = reference(p, grad_scale);
  std::vector<float> ref_dh(want.dhidden.begin(), want.dhidden.end());
  EXPECT_TRUE(all_close(ref_dh, dh_fd, 1e-6, 1e-8)) << "double reference vs finite differences";
}

TEST_F(CrossEntropyTest, ForwardOnlyLeavesGradientsAlone) {
  const Problem p = make_problem(33, 16, 100, 1.0f, 40);
  const Reference want = reference(p, 1.0);
  int64_t valid = -1;
  const double loss = trlhpc::cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(), p.N, p.C,
                                                         p.V, 1.0f, nullptr, nullptr, 8, &valid);
  EXPECT_NEAR(loss, want.loss, 1e-5 * p.N);
  EXPECT_EQ(valid, want.valid);
}

TEST_F(CrossEntropyTest, AllTargetsIgnored) {
  Problem p = make_problem(5, 4, 9, 1.0f, 50);
  p.targets.assign(5, -100);
  const std::vector<float> dweight0 = random_floats(9 * 4, 51);
  const Result got = run(p, 1.0f, 2, dweight0);
  EXPECT_EQ(got.loss, 0.0);
  EXPECT_EQ(got.valid, 0);
  EXPECT_TRUE(all_close(got.dhidden, std::vector<double>(5 * 4, 0.0), 0, 0));
  EXPECT_EQ(got.dweight, dweight0);
}

TEST_F(CrossEntropyTest, RejectsOutOfRangeTargets) {
  Problem p = make_problem(3, 4, 9, 1.0f, 60);
  p.targets[1] = 9;
  EXPECT_THROW(run(p, 1.0f, 2, std::vector<float>(9 * 4, 0.0f)), trlhpc::UserError);
}

}  // namespace

// TRL's metrics (entropy, is_top1), computed by the fused kernel without the full logits, against the
// full logits in double: entropy_t = -sum_v p_v log p_v, top-1 = the target is torch.argmax's index
// (the FIRST maximum). Tolerance: the kernel's entropy uses fp32 logits and an fp32 sum of
// exp(d) * d over V terms (~1e-6 relative each), so 1e-4 absolute per token, summed over N tokens.
namespace {

struct MetricsReference {
  double entropy_sum = 0;
  int64_t top1 = 0;
};

MetricsReference metrics_reference(const Problem& p) {
  MetricsReference r;
  std::vector<double> z(p.V);
  for (int64_t t = 0; t < p.N; ++t) {
    if (p.targets[t] == -100) continue;
    for (int64_t v = 0; v < p.V; ++v) {
      // The kernel's logits are fp32 dot products; argmax ties must be decided on the same values.
      float zf = 0;
      for (int64_t c = 0; c < p.C; ++c) zf += p.hidden[t * p.C + c] * p.weight[v * p.C + c];
      z[v] = zf;
    }
    const int64_t first = std::max_element(z.begin(), z.end()) - z.begin();  // first of equal maxima
    r.top1 += first == p.targets[t];
    const double zmax = z[first];
    double sum = 0;
    for (int64_t v = 0; v < p.V; ++v) sum += std::exp(z[v] - zmax);
    for (int64_t v = 0; v < p.V; ++v) {
      const double prob = std::exp(z[v] - zmax) / sum;
      if (prob > 0) r.entropy_sum -= prob * std::log(prob);
    }
  }
  return r;
}

}  // namespace

TEST_F(CrossEntropyTest, TrlEntropyAndTopOneMatchTheFullLogits) {
  for (uint64_t seed : {3u, 4u}) {
    Problem p = make_problem(37, 16, 301, 1.0f, seed);
    // Targets that are the argmax for some rows (otherwise top-1 would be 0 almost surely): the target of
    // every third valid row becomes the reference's argmax.
    for (int64_t t = 0; t < p.N; t += 3)
      if (p.targets[t] != -100) {
        std::vector<float> z(p.V);
        for (int64_t v = 0; v < p.V; ++v)
          for (int64_t c = 0; c < p.C; ++c) z[v] += p.hidden[t * p.C + c] * p.weight[v * p.C + c];
        p.targets[t] = static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
      }
    const MetricsReference want = metrics_reference(p);
    ASSERT_GT(want.top1, 0);
    for (int64_t chunk : {1, 5, 64}) {
      trlhpc::cpu::CrossEntropyMetrics got;
      int64_t valid = 0;
      std::vector<float> dh(p.N * p.C), dw(p.V * p.C, 0.0f);
      trlhpc::cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(), p.N, p.C, p.V, 0.5f,
                                         dh.data(), dw.data(), chunk, &valid, &got);
      EXPECT_EQ(got.top1, want.top1) << "chunk " << chunk;
      EXPECT_NEAR(got.entropy_sum, want.entropy_sum, 1e-4 * static_cast<double>(valid)) << "chunk " << chunk;
      // The metrics change nothing else: the same loss and gradients as without them.
      std::vector<float> dh2(p.N * p.C), dw2(p.V * p.C, 0.0f);
      const double loss_with = trlhpc::cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(),
                                                                  p.N, p.C, p.V, 0.5f, dh2.data(), dw2.data(), chunk,
                                                                  nullptr, &got);
      const double loss_without = trlhpc::cpu::cross_entropy_fwd_bwd(p.hidden.data(), p.weight.data(), p.targets.data(),
                                                                     p.N, p.C, p.V, 0.5f, dh.data(), dw.data(), chunk,
                                                                     nullptr, nullptr);
      EXPECT_EQ(loss_with, loss_without);
      EXPECT_EQ(dh2, dh);
    }
  }
}

// Equal maxima: torch.argmax (and TRL's is_top1) take the first, so a target at a later tied index is
// not top-1.
TEST_F(CrossEntropyTest, TopOneTakesTheFirstOfEqualMaxima) {
  const int64_t C = 4, V = 6;
  std::vector<float> weight(V * C, 0.0f);
  for (int64_t c = 0; c < C; ++c) weight[2 * C + c] = weight[4 * C + c] = 1.0f;  // rows 2 and 4 equal: tied logits
  const std::vector<float> hidden = {1, 1, 1, 1, 1, 1, 1, 1};                   // two tokens
  for (auto [target, want] : {std::pair{2, 1}, std::pair{4, 0}, std::pair{0, 0}}) {
    const std::vector<int32_t> targets = {target, target};
    trlhpc::cpu::CrossEntropyMetrics got;
    trlhpc::cpu::cross_entropy_fwd_bwd(hidden.data(), weight.data(), targets.data(), 2, C, V, 1.0f, nullptr, nullptr, 8,
                                       nullptr, &got);
    EXPECT_EQ(got.top1, 2 * want) << "target " << target;
  }
}
