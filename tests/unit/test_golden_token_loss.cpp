// --label_smoothing_factor and --loss_type dft through the whole model against transformers: the golden
// fixtures (tests/golden/make_golden.py) hold transformers' own float64 logits of a packed + padded batch
// (softcapped for gemma2_tiny, as outputs.logits are). From those logits this test computes the losses
// the way transformers' LabelSmoother and TRL's SFTTrainer do (see test_cpu_token_loss.cpp), and the
// decoder's fused loss must give the same token mean. Tolerance: the plain loss already matches the
// fixture to 1e-5 relative (test_golden_transformers.cpp); the smoothed term averages V logits that
// each carry ~1e-5 absolute fp32 error, so 2e-5 relative.
#include <cmath>
#include <cstdio>
#include <vector>

#include "golden_fixture.hpp"
#include "test_support.hpp"
#include "trlhpc/io/safetensors.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"

namespace trlhpc {
namespace {

// The token mean of the loss over the fixture's targets, from its logits (N, V), in double.
double reference_mean(const std::vector<float>& logits, const std::vector<int32_t>& targets, int64_t V,
                      const TokenLoss& loss) {
  double total = 0;
  int64_t count = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const int32_t y = targets[t];
    if (y == kIgnoreIndex) continue;
    const float* z = logits.data() + static_cast<int64_t>(t) * V;  // (V)
    double zmax = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) zmax = std::max(zmax, static_cast<double>(z[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - zmax);
    const double log_sum = zmax + std::log(sum);
    const double nll = log_sum - z[y];
    double smoothed = 0;  // sum_v -log p_v
    for (int64_t v = 0; v < V; ++v) smoothed += log_sum - z[v];
    const double eps = loss.label_smoothing;
    const double row = (1 - eps) * nll + eps * smoothed / static_cast<double>(V);
    total += loss.dft ? row * std::exp(-nll) : row;
    ++count;
  }
  return total / static_cast<double>(count);
}

class GoldenTokenLoss : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTokenLoss, SmoothedAndDftLossesMatchTransformersLogits) {
  const GoldenFixture fx = GoldenFixture::load(GetParam());
  auto ops = make_cpu_ops();
  HfModelDir dir(fx.model_dir);
  const int64_t V = dir.config().vocab_size;
  SafetensorsReader expected(fx.expected_tensors);
  std::vector<float> logits(fx.batch.targets.size() * static_cast<size_t>(V));  // (N, V)
  expected.read_f32("logits", 0, static_cast<int64_t>(logits.size()), logits.data());
  for (const TokenLoss loss : {TokenLoss{0.1f, false}, TokenLoss{0.5f, false}, TokenLoss{0.0f, true}}) {
    ParameterStore store(dir.config(), *ops);
    load_all_units(weights_from_hf_dir(dir), *ops, store);
    Decoder decoder(dir.config(), *ops, store, /*gradient_checkpointing=*/false, /*loss_chunk_tokens=*/5, {}, {}, loss);
    const DeviceBatch batch = DeviceBatch::upload(fx.batch, *ops);
    const LossResult r = decoder.forward_loss(batch);
    ASSERT_EQ(r.target_tokens, fx.target_tokens);
    const double got = r.loss_sum / static_cast<double>(r.target_tokens);
    const double want = reference_mean(logits, fx.batch.targets, V, loss);
    EXPECT_NEAR(got, want, 2e-5 * want) << "eps " << loss.label_smoothing << " dft " << loss.dft;
    // The plain loss of the same logits is the fixture's: the reference reads them right.
    EXPECT_NEAR(reference_mean(logits, fx.batch.targets, V, {}), fx.loss, 1e-5 * fx.loss);
    std::printf("[ measured ] %s eps %.1f dft %d: loss %.8f, relative to transformers' logits %.2e\n",
                GetParam().c_str(), loss.label_smoothing, loss.dft ? 1 : 0, got, std::abs(got - want) / want);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTokenLoss, ::testing::Values("qwen2_tiny", "llama_tiny", "gemma2_tiny"));

}  // namespace
}  // namespace trlhpc
