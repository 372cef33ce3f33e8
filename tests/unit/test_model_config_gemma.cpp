// Gemma 3 text configs (src/model/family/gemma3.cpp): google/gemma-3-1b-pt's config.json as
// published (transformers 4 spelling) parses to the structure transformers builds and counts its
// parameters as transformers does; transformers 5's rope_parameters spelling gives the same model;
// defaults follow Gemma3TextConfig; what trlhpc does not compute is refused naming the field.
// Gemma 2 configs (src/model/family/gemma2.cpp) likewise from google/gemma-2-2b's config.json, with
// Gemma2Config's defaults (softcaps 50 / 30, alternating layers) and the softcaps written back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

json gemma3_1b_config() {
  return json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": false,
    "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": 1,
    "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_scaling": null,
    "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "vocab_size": 262144})");
}

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

TEST(ModelConfigGemma, ParsesGemma3OneBillion) {
  const ModelConfig c = ModelConfig::from_json(gemma3_1b_config(), "gemma3.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::Gemma3);
  EXPECT_STREQ(c.model_type(), "gemma3_text");
  EXPECT_TRUE(c.qk_norm && c.norm_weight_offset && c.sandwich_norms && c.scale_embeddings && c.tie_word_embeddings);
  EXPECT_EQ(c.mlp_activation, MlpActivation::GeluTanh);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.parameter_count(), 999885952);  // gemma-3-1b-pt's num_parameters() in transformers
  // Layers 5, 11, 17, 23 full (pattern 6), the rest sliding with window 512 and the local RoPE base.
  for (int64_t l = 0; l < 26; ++l) {
    const bool full = (l + 1) % 6 == 0;
    EXPECT_EQ(c.attention_window(l), full ? 0 : 512) << l;
    EXPECT_EQ(c.layer_uses_local_rope(l), !full) << l;
  }
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / 16.0f);
  EXPECT_EQ(c.embedding_scale(false), static_cast<float>(std::sqrt(1152.0)));
  EXPECT_EQ(c.embedding_scale(true), 34.0f);  // bf16(33.941...) = 34
  // Local frequencies use base 1e4, global ones 1e6: the second inverse frequency differs.
  const std::vector<float> global = rope_inverse_frequencies(c), local = rope_inverse_frequencies(c, true);
  EXPECT_FLOAT_EQ(local[1], 1.0f / std::pow(10000.0f, 2.0f / 256.0f));
  EXPECT_FLOAT_EQ(global[1], 1.0f / std::pow(1000000.0f, 2.0f / 256.0f));
  size_t norms = 0;
  for (const ParameterSpec& spec : parameter_specs(c, TpLayout{})) norms += spec.kind == ParameterKind::Norm;
  EXPECT_EQ(norms, 26u * 6 + 1);  // four layer norms and q/k norms per layer, the final norm
}

TEST(ModelConfigGemma, RopeParametersSpellingAndLinearScaling) {
  json j = gemma3_1b_config();
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  const ModelConfig c = ModelConfig::from_json(j, "gemma3.json");
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_TRUE(c.rope_scaling.enabled && c.rope_scaling.linear);
  const std::vector<float> scaled = rope_inverse_frequencies(c);
  EXPECT_FLOAT_EQ(scaled[1], 1.0f / std::pow(1000000.0f, 2.0f / 256.0f) / 8.0f);
  // Written back in the transformers 4 spelling both versions read, and parsed to the same model.
  const ModelConfig back = ModelConfig::from_json(c.to_json(), "saved.json");
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(c.to_json()["rope_scaling"], json({{"rope_type", "linear"}, {"factor", 8.0}}));
  EXPECT_FALSE(c.to_json().contains("hidden_act"));
  // transformers 5's strict Gemma3TextConfig refuses a float query_pre_attn_scalar (found by
  // tests/e2e/test_gemma.sh's transformers peer check).
  EXPECT_TRUE(c.to_json()["query_pre_attn_scalar"].is_number_integer());
}

TEST(ModelConfigGemma, DefaultsAreGemma3TextConfigs) {
  json j = gemma3_1b_config();
  for (const char* key : {"head_dim", "query_pre_attn_scalar", "sliding_window", "sliding_window_pattern",
                          "rope_theta", "rope_local_base_freq", "hidden_activation", "tie_word_embeddings"})
    j.erase(key);
  const ModelConfig c = ModelConfig::from_json(j, "gemma3.json");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_window_pattern, 6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_TRUE(c.tie_word_embeddings);
  // Gemma3TextConfig's token ids where config.json has none (pad 0 is the embedding's padding_idx); an
  // explicit null stays null.
  for (const char* key : {"pad_token_id", "eos_token_id", "bos_token_id"}) j.erase(key);
  const ModelConfig ids = ModelConfig::from_json(j, "gemma3.json");
  EXPECT_EQ(ids.pad_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(ids.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(ids.bos_token_id, std::optional<int64_t>(2));
  j["pad_token_id"] = nullptr;
  EXPECT_FALSE(ModelConfig::from_json(j, "gemma3.json").pad_token_id.has_value());
}

// Gemma3ForCausalLM applies the caps when they are set (its attention and head share Gemma 2's code):
// read, reported and written back; null (the published configs) is none.
TEST(ModelConfigGemma, Gemma3SoftcappingWhenSet) {
  const ModelConfig none = ModelConfig::from_json(gemma3_1b_config(), "gemma3.json");
  EXPECT_EQ(none.attention_softcap(), 0.0f);
  EXPECT_EQ(none.final_logit_softcap(), 0.0f);
  EXPECT_TRUE(none.to_json()["attn_logit_softcapping"].is_null());
  json j = gemma3_1b_config();
  j["final_logit_softcapping"] = 30.0;
  j["attn_logit_softcapping"] = 50.0;
  const ModelConfig c = ModelConfig::from_json(j, "gemma3.json");
  EXPECT_EQ(c.attention_softcap(), 50.0f);
  EXPECT_EQ(c.final_logit_softcap(), 30.0f);
  EXPECT_EQ(c.to_json()["final_logit_softcapping"], 30.0);
  EXPECT_EQ(ModelConfig::from_json(c.to_json(), "saved.json").to_json(), c.to_json());
}

TEST(ModelConfigGemma, RefusesWhatItDoesNotCompute) {
  json j = gemma3_1b_config();
  j["final_logit_softcapping"] = 0.0;  // transformers would divide by it
  expect_user_error(j, {"final_logit_softcapping", "positive"});
  j = gemma3_1b_config();
  j["attn_logit_softcapping"] = -50.0;
  expect_user_error(j, {"attn_logit_softcapping", "positive"});
  j = gemma3_1b_config();
  j["attn_logit_softcapping"] = "50";
  expect_user_error(j, {"attn_logit_softcapping", "number"});
  j = gemma3_1b_config();
  j["hidden_activation"] = "gelu";
  expect_user_error(j, {"hidden_activation", "gelu_pytorch_tanh"});
  j = gemma3_1b_config();
  j["use_bidirectional_attention"] = true;
  expect_user_error(j, {"use_bidirectional_attention"});
  j = gemma3_1b_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_user_error(j, {"rope_scaling.rope_type", "linear"});
  j = gemma3_1b_config();
  j["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  expect_user_error(j, {"rope_parameters.sliding_attention.rope_type"});
  j = gemma3_1b_config();
  j["layer_types"] = {"sliding_attention"};
  expect_user_error(j, {"layer_types"});
}

// google/gemma-2-2b's config.json as published (transformers 4.42 spelling).
json gemma2_2b_config() {
  return json::parse(R"({
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.4", "use_cache": true, "vocab_size": 256000})");
}

TEST(ModelConfigGemma, ParsesGemma2TwoBillion) {
  const ModelConfig c = ModelConfig::from_json(gemma2_2b_config(), "gemma2.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::Gemma2);
  EXPECT_STREQ(c.model_type(), "gemma2");
  EXPECT_STREQ(c.architecture_name(), "Gemma2ForCausalLM");
  EXPECT_TRUE(c.norm_weight_offset && c.sandwich_norms && c.scale_embeddings && c.tie_word_embeddings);
  EXPECT_FALSE(c.qk_norm || c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(c.mlp_activation, MlpActivation::GeluTanh);
  EXPECT_EQ(c.parameter_count(), 2614341888);  // Gemma2ForCausalLM(config).num_parameters() in transformers 5
  // Even layers sliding (window 4096), odd layers full; one RoPE base everywhere.
  for (int64_t l = 0; l < 26; ++l) {
    EXPECT_EQ(c.attention_window(l), l % 2 == 0 ? 4096 : 0) << l;
    EXPECT_FALSE(c.layer_uses_local_rope(l)) << l;
  }
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / 16.0f);
  EXPECT_EQ(c.attention_softcap(), 50.0f);
  EXPECT_EQ(c.final_logit_softcap(), 30.0f);
  size_t norms = 0;
  for (const ParameterSpec& spec : parameter_specs(c, TpLayout{})) norms += spec.kind == ParameterKind::Norm;
  EXPECT_EQ(norms, 26u * 4 + 1);  // four layer norms per layer (no q/k norms), the final norm
  const std::vector<std::string> structure = c.structure();
  for (const char* phrase : {"attention scores softcapped at 50", "final logits softcapped at 30", "(1 + w) RMSNorm"})
    EXPECT_NE(std::find(structure.begin(), structure.end(), phrase), structure.end()) << phrase;
  EXPECT_EQ(std::find(structure.begin(), structure.end(), "q/k norms"), structure.end());
  // Written back so that transformers derives the same model, and read back equal.
  const json written = c.to_json();
  EXPECT_EQ(written["attn_logit_softcapping"], 50.0);
  EXPECT_EQ(written["final_logit_softcapping"], 30.0);
  EXPECT_EQ(written["layer_types"][0], "sliding_attention");
  EXPECT_EQ(written["layer_types"][1], "full_attention");
  EXPECT_TRUE(written["query_pre_attn_scalar"].is_number_integer());
  EXPECT_EQ(ModelConfig::from_json(written, "saved.json").to_json(), written);
}

// Gemma2Config's defaults: head_dim 256, query_pre_attn_scalar 256, sliding_window 4096, rope_theta 1e4,
// softcaps 50 and 30, layer_types alternating from a sliding layer 0, pad / eos / bos 0 / 1 / 2.
TEST(ModelConfigGemma, DefaultsAreGemma2Configs) {
  const json j = json::parse(R"({"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100})");
  const ModelConfig c = ModelConfig::from_json(j, "gemma2.json");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.attn_logit_softcapping, 50.0);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.layer_types(), (std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention"}));
  EXPECT_EQ(c.pad_token_id, std::optional<int64_t>(0));
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.bos_token_id, std::optional<int64_t>(2));
  EXPECT_TRUE(c.tie_word_embeddings);
  // Null caps are no caps (written back as null); layer_types as given win over the derivation.
  json k = j;
  k["attn_logit_softcapping"] = nullptr;
  k["final_logit_softcapping"] = nullptr;
  k["layer_types"] = {"full_attention", "full_attention", "sliding_attention"};
  k["pad_token_id"] = nullptr;
  const ModelConfig d = ModelConfig::from_json(k, "gemma2.json");
  EXPECT_EQ(d.attention_softcap(), 0.0f);
  EXPECT_EQ(d.final_logit_softcap(), 0.0f);
  EXPECT_TRUE(d.to_json()["final_logit_softcapping"].is_null());
  EXPECT_EQ(d.attention_window(0), 0);
  EXPECT_EQ(d.attention_window(2), 4096);
  EXPECT_FALSE(d.pad_token_id.has_value());
}

TEST(ModelConfigGemma, Gemma2RefusesWhatItDoesNotCompute) {
  json j = gemma2_2b_config();
  j["attn_logit_softcapping"] = 0;
  expect_user_error(j, {"attn_logit_softcapping", "positive"});
  j = gemma2_2b_config();
  j["hidden_activation"] = "gelu";
  expect_user_error(j, {"hidden_activation", "gelu_pytorch_tanh"});
  j = gemma2_2b_config();
  j["use_bidirectional_attention"] = true;
  expect_user_error(j, {"use_bidirectional_attention"});
  j = gemma2_2b_config();
  j["num_attention_heads"] = 7;
  j["num_key_value_heads"] = 7;
  expect_user_error(j, {"num_attention_heads", "Gemma2Config"});
  j = gemma2_2b_config();
  j["sliding_window"] = nullptr;  // the derived layer_types slide, with no window
  expect_user_error(j, {"sliding_window"});
  j = gemma2_2b_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_user_error(j, {"rope_scaling.rope_type"});
}

}  // namespace
}  // namespace trlhpc
