// ModelConfig: parsing real and written configs, rejecting what trlhpc does not compute, RoPE frequencies.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

std::string stories_config() { return ::trlhpc::testing::shared_data_dir() + "/stories260K/config.json"; }

// Qwen2-0.5B's config.json (as published, trimmed of fields trlhpc ignores).
json qwen2_config() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true, "hidden_act": "silu",
    "use_sliding_window": false, "sliding_window": 131072, "max_window_layers": 24,
    "attention_dropout": 0.0, "initializer_range": 0.02, "bos_token_id": 151643,
    "eos_token_id": 151643, "torch_dtype": "bfloat16", "use_cache": true})");
}

// Qwen3-0.6B's config.json (as published, trimmed of fields trlhpc ignores): head_dim 128 while
// hidden / heads is 64.
json qwen3_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
}

json llama31_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu",
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16"})");
}

// Expects a UserError whose message contains every one of `needles`.
void expect_user_error(const json& config, std::initializer_list<std::string> needles) {
  try {
    ModelConfig::from_json(config, "/some/config.json");
    ADD_FAILURE() << "no UserError for " << config.dump();
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("/some/config.json"), std::string::npos) << message;
    for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(ModelConfig, ParsesStories260K) {
  const ModelConfig c = ModelConfig::from_file(stories_config());
  EXPECT_EQ(c.architecture, ModelArchitecture::Llama);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_scaling.enabled);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.torch_dtype, "float32");
  // 512*64 embedding + 5 layers * (2*64 + 64*64 + 2*32*64 + 64*64 + 3*172*64) + 64 final norm.
  EXPECT_EQ(c.parameter_count(), 512 * 64 + 5 * (128 + 4096 + 4096 + 4096 + 3 * 172 * 64) + 64);
}

TEST(ModelConfig, ParsesQwen2WithBiasesAndCountsParameters) {
  const ModelConfig c = ModelConfig::from_json(qwen2_config(), "qwen2.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::Qwen2);
  EXPECT_STREQ(c.model_type(), "qwen2");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.parameter_count(), 494032768);  // Qwen2-0.5B's num_parameters() in transformers
  int64_t total = 0;
  for (const auto& spec : parameter_specs(c)) total += spec.numel();
  EXPECT_EQ(total, c.parameter_count());
}

TEST(ModelConfig, ParsesQwen3WithQkNormsAndCountsParameters) {
  const ModelConfig c = ModelConfig::from_json(qwen3_config(), "qwen3.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::Qwen3);
  EXPECT_STREQ(c.architecture_name(), "Qwen3ForCausalLM");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.parameter_count(), 596049920);  // Qwen3-0.6B's num_parameters() in transformers
  int64_t total = 0, norms = 0;
  for (const ParameterSpec& s : parameter_specs(c)) {
    total += s.numel();
    if (s.name == "model.layers.0.self_attn.q_norm.weight" || s.name == "model.layers.0.self_attn.k_norm.weight") {
      EXPECT_EQ(s.shape, (Shape{128}));
      EXPECT_EQ(s.kind, ParameterKind::Norm);  // no weight decay, init ones
      ++norms;
    }
  }
  EXPECT_EQ(norms, 2);
  EXPECT_EQ(total, c.parameter_count());

  // Qwen3Config's defaults: head_dim 128 (not hidden / heads), attention_bias false; attention_bias true
  // puts a bias on q/k/v and o, never on the MLP.
  json j = qwen3_config();
  j.erase("head_dim");
  j["hidden_size"] = 64;
  j["attention_bias"] = true;
  const ModelConfig d = ModelConfig::from_json(j, "qwen3.json");
  EXPECT_EQ(d.head_dim, 128);
  EXPECT_TRUE(d.qkv_bias && d.o_bias);
  EXPECT_FALSE(d.mlp_bias);
  j = qwen3_config();
  j.erase("architectures");  // model_type alone names the family
  EXPECT_EQ(ModelConfig::from_json(j, "qwen3.json").architecture, ModelArchitecture::Qwen3);
}

TEST(ModelConfig, RefusesQwen3MoeNamingTheKey) {
  json j = qwen3_config();
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  expect_user_error(j, {"architectures", "Qwen3MoeForCausalLM"});
}

TEST(ModelConfig, DefaultsAndAlternativeForms) {
  json j = json::parse(R"({"model_type": "llama", "hidden_size": 48, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 6, "vocab_size": 100, "head_dim": 16,
    "attention_bias": true, "mlp_bias": true, "dtype": "bfloat16",
    "rope_parameters": {"rope_type": "default", "rope_theta": 250000.0}})");
  const ModelConfig c = ModelConfig::from_json(j, "x.json");
  EXPECT_EQ(c.num_key_value_heads, 6);  // defaults to the head count
  EXPECT_EQ(c.head_dim, 16);            // explicit head_dim wins over hidden/heads = 8
  EXPECT_TRUE(c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(parameter_specs(c).back().name, "lm_head.weight");
}

TEST(ModelConfig, JsonRoundTrip) {
  for (const json& source : {qwen2_config(), llama31_config(), qwen3_config()}) {
    const ModelConfig a = ModelConfig::from_json(source, "a.json");
    const ModelConfig b = ModelConfig::from_json(a.to_json(), "b.json");
    EXPECT_EQ(a.to_json(), b.to_json());
    EXPECT_EQ(a.parameter_count(), b.parameter_count());
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
    EXPECT_EQ(b.rope_scaling.enabled, a.rope_scaling.enabled);
  }
  const std::string dir = ::trlhpc::testing::make_temp_dir("config");
  const ModelConfig stories = ModelConfig::from_file(stories_config());
  stories.save(dir + "/config.json");
  EXPECT_EQ(ModelConfig::from_file(dir + "/config.json").to_json(), stories.to_json());
  std::filesystem::remove_all(dir);
}

TEST(ModelConfig, RejectsUnsupportedValuesNamingTheField) {
  json j = qwen2_config();
  j["architectures"] = {"Phi3ForCausalLM"};  // (Gemma 2 and 3 train now: test_model_config_gemma.cpp)
  j["model_type"] = "phi3";
  expect_user_error(j, {"architectures", "Phi3ForCausalLM"});

  j = qwen2_config();
  j["hidden_act"] = "gelu";
  expect_user_error(j, {"hidden_act", "gelu"});

  j = llama31_config();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expect_user_error(j, {"rope_scaling.type", "yarn"});

  j = llama31_config();
  j["num_key_value_heads"] = 5;
  expect_user_error(j, {"num_key_value_heads", "5"});

  j = llama31_config();
  j.erase("hidden_size");
  expect_user_error(j, {"hidden_size", "missing"});

  j = llama31_config();
  j["vocab_size"] = "lots";
  expect_user_error(j, {"vocab_size", "lots"});

  j = llama31_config();
  j["attention_dropout"] = 0.1;
  expect_user_error(j, {"attention_dropout", "0.1"});

  j = llama31_config();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "qwen2";
  expect_user_error(j, {"model_type", "qwen2"});
}

// Every family (src/model/family/, one file each): found by its class name and by its model type alone,
// the configuration class's defaults (head_dim, max_position_embeddings, tied head; from the
// transformers 5 configuration classes), written back under its own names, read back equal, and the
// SwiGLU families refusing another hidden_act (each family checks its own activation field).
TEST(ModelConfig, EveryFamilyIsFoundByNameAndTypeAndRoundTrips) {
  struct Family {
    const char *class_name, *model_type;
    int64_t head_dim, max_positions;
    bool tied, swiglu;
  };
  const Family families[] = {
      {"LlamaForCausalLM", "llama", 8, 2048, false, true},
      {"Qwen2ForCausalLM", "qwen2", 8, 32768, false, true},
      {"Qwen3ForCausalLM", "qwen3", 128, 32768, false, true},
      {"MistralForCausalLM", "mistral", 8, 131072, false, true},
      {"SmolLM3ForCausalLM", "smollm3", 8, 32768, true, true},
      {"Gemma2ForCausalLM", "gemma2", 256, 8192, true, false},
      {"Gemma3ForCausalLM", "gemma3_text", 256, 131072, true, false},
  };
  for (const Family& f : families) {
    SCOPED_TRACE(f.class_name);
    const json sizes = {{"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 2},
                        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"vocab_size", 64}};
    json by_class = sizes, by_type = sizes;
    by_class["architectures"] = {f.class_name};
    by_type["model_type"] = f.model_type;
    for (const json& j : {by_class, by_type}) {
      const ModelConfig c = ModelConfig::from_json(j, "/some/config.json");
      EXPECT_STREQ(c.architecture_name(), f.class_name);
      EXPECT_STREQ(c.model_type(), f.model_type);
      EXPECT_EQ(c.head_dim, f.head_dim);
      EXPECT_EQ(c.max_position_embeddings, f.max_positions);
      EXPECT_EQ(c.tie_word_embeddings, f.tied);
      const json written = c.to_json();
      EXPECT_EQ(written["architectures"][0], f.class_name);
      EXPECT_EQ(written["model_type"], f.model_type);
      const ModelConfig back = ModelConfig::from_json(written, "written");
      EXPECT_EQ(back.to_json(), written);
      EXPECT_EQ(back.parameter_count(), c.parameter_count());
    }
    json gelu = by_class;
    gelu[f.swiglu ? "hidden_act" : "hidden_activation"] = "relu";
    expect_user_error(gelu, {f.swiglu ? "hidden_act" : "hidden_activation", "relu"});
  }
  // The refusal lists every family.
  json unknown = qwen2_config();
  unknown["architectures"] = {"FalconForCausalLM"};
  unknown.erase("model_type");
  expect_user_error(unknown, {"FalconForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                              "MistralForCausalLM", "SmolLM3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"});
}

TEST(ModelConfig, MissingOrCorruptFileNamesTheFile) {
  const std::string dir = ::trlhpc::testing::make_temp_dir("config-bad");
  try {
    ModelConfig::from_file(dir + "/nope.json");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/nope.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/bad.json") << "{\"hidden_size\": 64,";
  try {
    ModelConfig::from_file(dir + "/bad.json");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/bad.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// inv_freq[i] = theta^(-2i/HS), then llama3's three bands (transformers' _compute_llama3_parameters).
std::vector<double> expected_inverse_frequencies(const ModelConfig& c) {
  std::vector<double> out;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double f = 1.0 / std::pow(c.rope_theta, 2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    if (!c.rope_scaling.enabled) {
      out.push_back(f);
      continue;
    }
    const RopeScaling& s = c.rope_scaling;
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double wavelen = 2 * M_PI / f;
    if (wavelen < old_len / s.high_freq_factor) out.push_back(f);
    else if (wavelen > old_len / s.low_freq_factor) out.push_back(f / s.factor);
    else {
      const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back((1 - smooth) * f / s.factor + smooth * f);
    }
  }
  return out;
}

TEST(ModelConfig, RopeInverseFrequenciesPlain) {
  const ModelConfig c = ModelConfig::from_file(stories_config());
  const std::vector<float> got = rope_inverse_frequencies(c);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(::trlhpc::testing::all_close(got, expected_inverse_frequencies(c), 1e-6, 0));
  EXPECT_FLOAT_EQ(got[0], 1.0f);
  EXPECT_FLOAT_EQ(got[1], 0.1f);  // 10000^(-2/8)
}

TEST(ModelConfig, RopeInverseFrequenciesLlama3Scaling) {
  const ModelConfig c = ModelConfig::from_json(llama31_config(), "llama31.json");
  ASSERT_TRUE(c.rope_scaling.enabled);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  const std::vector<float> got = rope_inverse_frequencies(c);
  ASSERT_EQ(got.size(), 64u);
  const std::vector<double> want = expected_inverse_frequencies(c);
  EXPECT_TRUE(::trlhpc::testing::all_close(got, want, 2e-6, 0));
  // All three bands occur: unchanged high frequencies, smoothed middle, divided-by-8 low frequencies.
  int unchanged = 0, divided = 0, smoothed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double plain = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 128.0);
    if (std::abs(want[i] - plain) <= 1e-12 * plain) ++unchanged;
    else if (std::abs(want[i] - plain / 8) <= 1e-12 * plain) ++divided;
    else ++smoothed;
  }
  EXPECT_GT(unchanged, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
  // Bit-exact against transformers 5.x (ROPE_INIT_FUNCTIONS["llama3"] on this config, fp32 on CPU),
  // one value per band and the band edges; index 29 is smoothed and catches an FMA-fused sum.
  const std::vector<std::pair<size_t, float>> transformers_values = {
      {0, 0x1.0p+0f},          {20, 0x1.0f5386p-6f},  {25, 0x1.8554ecp-8f}, {29, 0x1.1bfa0cp-9f},
      {33, 0x1.47e21p-12f},    {40, 0x1.1f91fp-15f},  {63, 0x1.4985fep-22f}};
  for (const auto& [i, value] : transformers_values) EXPECT_EQ(got[i], value) << "inv_freq[" << i << "]";
}

}  // namespace
}  // namespace trlhpc
