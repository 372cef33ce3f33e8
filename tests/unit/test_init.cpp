// Deterministic init: shards reproduce the full init bit for bit, the statistics are right, streams are
// independent, norms are ones and biases zeros.
#include <cmath>
#include <cstring>

#include "test_support.hpp"
#include "trlhpc/model/init.hpp"

namespace trlhpc {
namespace {

ModelConfig small_config() {
  return ModelConfig::from_json(nlohmann::json::parse(R"({
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "initializer_range": 0.05,
    "pad_token_id": 7})"),
                                "small.json");
}

std::vector<float> full_init(const ModelConfig& config, const ParameterSpec& spec, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(spec.numel()));
  init_parameter(config, spec, seed, out.data());
  return out;
}

TEST(Init, KnownAnswers) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);  // FNV-1a 64 test vectors
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  // Philox4x32-10 with counter 0 and key 0 gives 6627e8d5 e169c58d bc57ac4c 9b00dbd8 (Random123's
  // known-answer test); the first normal of stream 0 is Box-Muller of those bits.
  const double u1 = (static_cast<double>((0x6627e8d5ull << 32 | 0xe169c58dull) >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>((0xbc57ac4cull << 32 | 0x9b00dbd8ull) >> 11) * 0x1.0p-53;
  EXPECT_EQ(init_standard_normal(0, 0), std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

TEST(Init, ShardedRangesMatchTheFullInit) {
  const ModelConfig config = small_config();
  for (const auto& spec : parameter_specs(config)) {
    const auto full = full_init(config, spec, 42);
    const int64_t n = spec.numel();
    for (int shards : {2, 3, 7}) {
      std::vector<float> pieced(full.size(), -1.0f);
      for (int r = 0; r < shards; ++r) {
        const int64_t begin = n * r / shards, end = n * (r + 1) / shards;
        init_parameter_range(config, spec, 42, begin, end, pieced.data() + begin);
      }
      ASSERT_EQ(std::memcmp(pieced.data(), full.data(), full.size() * 4), 0) << spec.name << " in " << shards;
    }
  }
}

TEST(Init, FlatRangeOfAUnitMatchesPerParameterInit) {
  const ModelConfig config = small_config();
  const auto unit = unit_parameter_specs(config, 1);
  std::vector<float> concatenated;
  for (const auto& spec : unit) {
    const auto values = full_init(config, spec, 9);
    concatenated.insert(concatenated.end(), values.begin(), values.end());
  }
  const int64_t total = static_cast<int64_t>(concatenated.size()), padded = total + 13;
  for (int shards : {1, 4, 5}) {
    const int64_t shard_size = (padded + shards - 1) / shards;
    std::vector<float> flat(static_cast<size_t>(shard_size * shards), -1.0f);
    for (int r = 0; r < shards; ++r)
      init_flat_range(config, unit, 9, r * shard_size, (r + 1) * shard_size, flat.data() + r * shard_size);
    ASSERT_EQ(std::memcmp(flat.data(), concatenated.data(), concatenated.size() * 4), 0) << shards;
    for (size_t i = concatenated.size(); i < flat.size(); ++i) ASSERT_EQ(flat[i], 0.0f) << i;
  }
}

TEST(Init, NormalStatistics) {
  const ModelConfig config = small_config();
  const ParameterSpec spec{"model.layers.0.mlp.up_proj.weight", {512, 512}, ParameterKind::Matrix, 1};
  const auto values = full_init(config, spec, 42);
  double sum = 0, sum_sq = 0;
  int64_t within_one_std = 0;
  for (float v : values) {
    sum += v;
    sum_sq += double(v) * v;
    within_one_std += std::abs(v) <= 0.05f;
  }
  const double n = static_cast<double>(values.size());
  const double mean = sum / n, std_dev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_LT(std::abs(mean), 4 * 0.05 / std::sqrt(n));
  EXPECT_NEAR(std_dev, 0.05, 0.05 * 0.01);
  EXPECT_NEAR(static_cast<double>(within_one_std) / n, 0.6827, 0.005);
}

TEST(Init, StreamsDifferByNameAndSeed) {
  const ModelConfig config = small_config();
  const ParameterSpec a{"model.layers.0.mlp.up_proj.weight", {128, 64}, ParameterKind::Matrix, 1};
  ParameterSpec b = a;
  b.name = "model.layers.0.mlp.gate_proj.weight";
  const auto x = full_init(config, a, 42), y = full_init(config, b, 42), z = full_init(config, a, 43);
  EXPECT_EQ(full_init(config, a, 42), x);  // deterministic
  auto correlation = [](const std::vector<float>& p, const std::vector<float>& q) {
    double pq = 0, pp = 0, qq = 0;
    for (size_t i = 0; i < p.size(); ++i) pq += double(p[i]) * q[i], pp += double(p[i]) * p[i], qq += double(q[i]) * q[i];
    return pq / std::sqrt(pp * qq);
  };
  EXPECT_LT(std::abs(correlation(x, y)), 0.05);
  EXPECT_LT(std::abs(correlation(x, z)), 0.05);
  EXPECT_NE(init_stream_key("a", 1), init_stream_key("a", 2));
  EXPECT_NE(init_stream_key("a", 1), init_stream_key("b", 1));
}

TEST(Init, NormsOnesBiasesZerosPadRowZero) {
  const ModelConfig config = small_config();
  bool saw_norm = false, saw_bias = false;
  for (const auto& spec : parameter_specs(config)) {
    const auto values = full_init(config, spec, 1);
    if (spec.kind == ParameterKind::Norm) {
      saw_norm = true;
      for (float v : values) ASSERT_EQ(v, 1.0f) << spec.name;
      EXPECT_FALSE(spec.weight_decay());
    } else if (spec.kind == ParameterKind::Bias) {
      saw_bias = true;
      for (float v : values) ASSERT_EQ(v, 0.0f) << spec.name;
      EXPECT_FALSE(spec.weight_decay());
    } else {
      EXPECT_TRUE(spec.weight_decay()) << spec.name;
    }
    if (spec.kind == ParameterKind::Embedding) {  // nn.Embedding(padding_idx = pad_token_id = 7)
      for (int64_t c = 0; c < 64; ++c) ASSERT_EQ(values[static_cast<size_t>(7 * 64 + c)], 0.0f);
      EXPECT_NE(values[6 * 64], 0.0f);
      std::vector<float> row(64, 1.0f);  // a shard covering only part of the pad row zeroes its part
      init_parameter_range(config, spec, 1, 7 * 64 + 10, 8 * 64 + 10, row.data());
      EXPECT_EQ(std::memcmp(row.data(), values.data() + 7 * 64 + 10, 64 * 4), 0);
    }
  }
  EXPECT_TRUE(saw_norm);
  EXPECT_TRUE(saw_bias);  // qwen2: q/k/v biases
}

}  // namespace
}  // namespace trlhpc
