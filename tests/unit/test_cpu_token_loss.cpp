// Label smoothing and the DFT loss in the fused LM head + cross-entropy (kernels/token_loss.hpp,
// kernels/cpu/cross_entropy.cpp), against a double reference written the way transformers'
// LabelSmoother and TRL's SFTTrainer compute them from full logits:
//   log_probs = log_softmax(z); nll = -log_probs[y]; smoothed = sum_v -log_probs[v]
//   label smoothing: (1 - eps) nll + eps smoothed / V        (LabelSmoother, per target token)
//   dft:             nll * exp(log_probs[y]).detach()         (SFTTrainer.compute_loss)
// Gradients against central finite differences of that reference (the DFT weight held at its value at
// the unperturbed point: detached), with and without a logit softcap, for several chunkings.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::TokenLoss;
using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

struct Problem {
  int64_t N, C, V;
  std::vector<double> hidden, weight;  // (N, C), (V, C)
  std::vector<int32_t> targets;        // (N), -100 = ignore
};

Problem make_problem(int64_t N, int64_t C, int64_t V, uint64_t seed) {
  const std::vector<float> h = random_floats(N * C, seed, 1.5f), w = random_floats(V * C, seed + 1);
  Problem p{N, C, V, {h.begin(), h.end()}, {w.begin(), w.end()}, {}};
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> target(0, static_cast<int32_t>(V - 1));
  for (int64_t t = 0; t < N; ++t) p.targets.push_back(t == 1 || gen() % 4 == 0 ? -100 : target(gen));
  return p;
}

// The reference loss sum over valid tokens, in double. cap > 0: z = cap tanh(z / cap) first (the model's
// softcapped logits are what TRL's losses see). dft_weights (N, optional): the detached p_y to use; when
// null they are computed here and, if `weights_out` is given, returned.
double reference_loss(const Problem& p, const std::vector<double>& hidden, const std::vector<double>& weight,
                      const TokenLoss& loss, double cap, const std::vector<double>* dft_weights = nullptr,
                      std::vector<double>* weights_out = nullptr) {
  if (weights_out) weights_out->assign(p.N, 0.0);
  std::vector<double> z(p.V), log_probs(p.V);
  double total = 0;
  for (int64_t t = 0; t < p.N; ++t) {
    const int32_t y = p.targets[t];
    if (y == -100) continue;
    for (int64_t v = 0; v < p.V; ++v) {
      z[v] = 0;
      for (int64_t c = 0; c < p.C; ++c) z[v] += hidden[t * p.C + c] * weight[v * p.C + c];
      if (cap > 0) z[v] = cap * std::tanh(z[v] / cap);
    }
    double zmax = -INFINITY, sum = 0;
    for (double x : z) zmax = std::max(zmax, x);
    for (double x : z) sum += std::exp(x - zmax);
    for (int64_t v = 0; v < p.V; ++v) log_probs[v] = z[v] - zmax - std::log(sum);
    const double nll = -log_probs[y];
    double smoothed = 0;
    for (double lp : log_probs) smoothed -= lp;
    const double eps = loss.label_smoothing;
    double row = (1 - eps) * nll + eps * smoothed / static_cast<double>(p.V);
    if (loss.dft) {
      const double w = dft_weights ? (*dft_weights)[t] : std::exp(log_probs[y]);
      if (weights_out) (*weights_out)[t] = w;
      row *= w;
    }
    total += row;
  }
  return total;
}

struct Result {
  double loss;
  std::vector<float> dhidden, dweight;  // (N, C), (V, C)
};

Result run(const Problem& p, float grad_scale, int64_t chunk, const TokenLoss& loss, float cap) {
  const std::vector<float> hidden(p.hidden.begin(), p.hidden.end()), weight(p.weight.begin(), p.weight.end());
  Result r{0, std::vector<float>(p.N * p.C, std::numeric_limits<float>::quiet_NaN()),
           std::vector<float>(p.V * p.C, 0.0f)};
  int64_t valid = 0;
  r.loss = trlhpc::cpu::cross_entropy_fwd_bwd(hidden.data(), weight.data(), p.targets.data(), p.N, p.C, p.V,
                                              grad_scale, r.dhidden.data(), r.dweight.data(), chunk, &valid,
                                              nullptr, false, cap, loss);
  return r;
}

class TokenLossTest : public ::testing::TestWithParam<TokenLoss> {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
};

// Central differences, step 1e-5, of grad_scale * reference_loss in double (exact to ~1e-9); the
// tolerance is the kernel's fp32 logits and softmax (1e-5 relative, as the plain kernel's test).
TEST_P(TokenLossTest, LossAndGradientsMatchTheReference) {
  const TokenLoss loss = GetParam();
  for (const double cap : {0.0, 3.0}) {
    const Problem p = make_problem(9, 6, 13, 50);
    const double grad_scale = 0.25;
    std::vector<double> hidden = p.hidden, weight = p.weight, dft_weights;
    const double want = reference_loss(p, hidden, weight, loss, cap, nullptr, &dft_weights);
    auto fd = [&](std::vector<double>& x) {
      std::vector<double> g(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double h = 1e-5, x0 = x[i];
        x[i] = x0 + h;
        const double up = reference_loss(p, hidden, weight, loss, cap, &dft_weights);
        x[i] = x0 - h;
        g[i] = grad_scale * (up - reference_loss(p, hidden, weight, loss, cap, &dft_weights)) / (2 * h);
        x[i] = x0;
      }
      return g;
    };
    const std::vector<double> dh_fd = fd(hidden), dw_fd = fd(weight);
    for (const int64_t chunk : {int64_t{1}, int64_t{4}, int64_t{20}}) {
      SCOPED_TRACE(::testing::Message() << "eps=" << loss.label_smoothing << " dft=" << loss.dft << " cap=" << cap
                                        << " chunk=" << chunk);
      const Result got = run(p, static_cast<float>(grad_scale), chunk, loss, static_cast<float>(cap));
      EXPECT_NEAR(got.loss, want, 1e-5 * p.N);
      EXPECT_TRUE(all_close(got.dhidden, dh_fd, 1e-5, 1e-6)) << "dhidden vs finite differences";
      EXPECT_TRUE(all_close(got.dweight, dw_fd, 1e-5, 1e-6)) << "dweight vs finite differences";
      for (int64_t c = 0; c < p.C; ++c) EXPECT_EQ(got.dhidden[1 * p.C + c], 0.0f) << "an ignored token's dhidden";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TokenLossTest,
                         ::testing::Values(TokenLoss{0.1f, false}, TokenLoss{0.6f, false}, TokenLoss{1.0f, false},
                                           TokenLoss{0.0f, true}, TokenLoss{0.2f, true}));

// The metrics (TRL's entropy and token accuracy) describe the softmax, whatever the loss: unchanged.
TEST(TokenLoss, MetricsAreThoseOfThePlainSoftmax) {
  const Problem p = make_problem(11, 6, 17, 60);
  const std::vector<float> hidden(p.hidden.begin(), p.hidden.end()), weight(p.weight.begin(), p.weight.end());
  auto metrics = [&](const TokenLoss& loss) {
    trlhpc::cpu::CrossEntropyMetrics m;
    int64_t valid = 0;
    trlhpc::cpu::cross_entropy_fwd_bwd(hidden.data(), weight.data(), p.targets.data(), p.N, p.C, p.V, 1.0f, nullptr,
                                       nullptr, 4, &valid, &m, false, 0.0f, loss);
    return m;
  };
  const trlhpc::cpu::CrossEntropyMetrics plain = metrics({}), smoothed = metrics({0.3f, false}),
                                         dft = metrics({0.0f, true});
  EXPECT_EQ(smoothed.entropy_sum, plain.entropy_sum);
  EXPECT_EQ(smoothed.top1, plain.top1);
  EXPECT_EQ(dft.entropy_sum, plain.entropy_sum);
  EXPECT_EQ(dft.top1, plain.top1);
}

TEST(TokenLoss, RefusesASmoothingOutsideZeroToOne) {
  const Problem p = make_problem(3, 4, 5, 70);
  for (const float eps : {-0.1f, 1.5f}) {
    try {
      run(p, 1.0f, 2, TokenLoss{eps, false}, 0.0f);
      ADD_FAILURE() << "label smoothing " << eps << " was accepted";
    } catch (const trlhpc::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("label smoothing"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
