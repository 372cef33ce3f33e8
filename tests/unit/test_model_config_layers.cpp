// ModelConfig's per-layer pattern (src/model/family/: qwen2.cpp, mistral.cpp, smollm3.cpp): sliding
// windows and RoPE-less layers derived from config.json as transformers 5's Qwen2/Qwen3/Mistral/SmolLM3
// configuration classes derive them (their __post_init__; the expected patterns below are what those
// classes compute for the same fields, checked by hand against transformers 5.25), the fields written
// back, and the refusals.
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

json base(const std::string& type, const std::string& cls, int layers) {
  return json{{"architectures", {cls}}, {"model_type", type}, {"hidden_size", 32}, {"intermediate_size", 40},
              {"num_hidden_layers", layers}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"vocab_size", 64}};
}

std::vector<int64_t> windows(const ModelConfig& c) {
  std::vector<int64_t> w;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) w.push_back(c.attention_window(l));
  return w;
}

std::vector<bool> ropes(const ModelConfig& c) {
  std::vector<bool> r;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) r.push_back(c.layer_uses_rope(l));
  return r;
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

// The same config read back from its own to_json: the same pattern, the same JSON.
void expect_round_trip(const ModelConfig& a) {
  const ModelConfig b = ModelConfig::from_json(a.to_json(), "b.json");
  EXPECT_EQ(windows(b), windows(a));
  EXPECT_EQ(ropes(b), ropes(a));
  EXPECT_EQ(b.to_json(), a.to_json());
}

TEST(ModelConfigLayers, QwenSlidingLayersFromMaxWindowLayers) {
  for (const auto& [type, cls] : {std::pair{"qwen3", "Qwen3ForCausalLM"}, std::pair{"qwen2", "Qwen2ForCausalLM"}}) {
    json j = base(type, cls, 4);
    j["use_sliding_window"] = true;
    j["sliding_window"] = 6;
    j["max_window_layers"] = 1;
    ModelConfig c = ModelConfig::from_json(j, "q.json");
    EXPECT_EQ(windows(c), (std::vector<int64_t>{0, 6, 6, 6})) << type;
    EXPECT_EQ(c.layer_types()[0], "full_attention");
    EXPECT_EQ(c.layer_types()[1], "sliding_attention");
    expect_round_trip(c);
    j.erase("sliding_window");  // Qwen*Config's default window, 4096
    EXPECT_EQ(windows(ModelConfig::from_json(j, "q.json")), (std::vector<int64_t>{0, 4096, 4096, 4096}));
    j.erase("max_window_layers");  // default 28: no layer of 4 slides
    EXPECT_EQ(windows(ModelConfig::from_json(j, "q.json")), (std::vector<int64_t>{0, 0, 0, 0}));
    // Without use_sliding_window the window is nulled, whatever sliding_window says.
    j = base(type, cls, 4);
    j["sliding_window"] = 6;
    j["max_window_layers"] = 0;
    c = ModelConfig::from_json(j, "q.json");
    EXPECT_EQ(windows(c), (std::vector<int64_t>{0, 0, 0, 0}));
    EXPECT_TRUE(c.to_json()["sliding_window"].is_null());
    expect_round_trip(c);
  }
}

TEST(ModelConfigLayers, ExplicitLayerTypesWin) {
  json j = base("qwen3", "Qwen3ForCausalLM", 3);
  j["use_sliding_window"] = true;
  j["sliding_window"] = 2;
  j["max_window_layers"] = 0;
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  const ModelConfig c = ModelConfig::from_json(j, "q.json");
  EXPECT_EQ(windows(c), (std::vector<int64_t>{2, 0, 2}));
  expect_round_trip(c);
}

TEST(ModelConfigLayers, MistralWindowOnEveryLayer) {
  json j = base("mistral", "MistralForCausalLM", 2);
  j["head_dim"] = 16;
  j["sliding_window"] = 3;
  ModelConfig c = ModelConfig::from_json(j, "m.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::Mistral);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_FALSE(c.qkv_bias || c.o_bias || c.mlp_bias);
  EXPECT_EQ(windows(c), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(c.to_json()["model_type"], "mistral");
  EXPECT_EQ(c.to_json()["architectures"][0], "MistralForCausalLM");
  expect_round_trip(c);
  j["sliding_window"] = nullptr;  // Mistral v0.2+: full attention
  c = ModelConfig::from_json(j, "m.json");
  EXPECT_EQ(windows(c), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(c.to_json()["sliding_window"].is_null());
  expect_round_trip(c);
  j.erase("sliding_window");  // MistralConfig's default window, 4096
  j.erase("head_dim");        // default hidden / heads
  c = ModelConfig::from_json(j, "m.json");
  EXPECT_EQ(windows(c), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position_embeddings, 131072);
}

TEST(ModelConfigLayers, SmolLM3NoRopeLayers) {
  json j = base("smollm3", "SmolLM3ForCausalLM", 8);
  ModelConfig c = ModelConfig::from_json(j, "s.json");
  // no_rope_layer_interval 4: [int((i + 1) % 4 != 0)] = 1 1 1 0 1 1 1 0; no window by default.
  EXPECT_EQ(ropes(c), (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(windows(c), std::vector<int64_t>(8, 0));
  EXPECT_TRUE(c.tie_word_embeddings);  // SmolLM3Config's default
  expect_round_trip(c);
  j["no_rope_layer_interval"] = 2;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 5;
  c = ModelConfig::from_json(j, "s.json");
  EXPECT_EQ(ropes(c), (std::vector<bool>{true, false, true, false, true, false, true, false}));
  EXPECT_EQ(windows(c), (std::vector<int64_t>{0, 5, 0, 5, 0, 5, 0, 5}));  // the RoPE-less layers slide
  expect_round_trip(c);
  j["no_rope_layers"] = {0, 0, 1, 1, 1, 1, 1, 1};
  c = ModelConfig::from_json(j, "s.json");
  EXPECT_EQ(ropes(c), (std::vector<bool>{false, false, true, true, true, true, true, true}));
  EXPECT_EQ(windows(c), (std::vector<int64_t>{5, 5, 0, 0, 0, 0, 0, 0}));
  expect_round_trip(c);
}

TEST(ModelConfigLayers, RefusesInconsistentPatternsNamingTheField) {
  json j = base("qwen3", "Qwen3ForCausalLM", 2);
  j["layer_types"] = {"full_attention", "sliding_attention"};  // use_sliding_window false: no window
  expect_user_error(j, {"sliding_window", "sliding_attention"});
  j["layer_types"] = {"full_attention"};
  expect_user_error(j, {"layer_types", "num_hidden_layers (2)"});
  j["layer_types"] = {"full_attention", "chunked_attention"};
  expect_user_error(j, {"layer_types", "chunked_attention"});
  j = base("qwen3", "Qwen3ForCausalLM", 2);
  j["use_sliding_window"] = true;
  j["sliding_window"] = 0;
  expect_user_error(j, {"sliding_window", "positive"});
  j = base("smollm3", "SmolLM3ForCausalLM", 2);
  j["no_rope_layers"] = {1, 2};
  expect_user_error(j, {"no_rope_layers", "2"});
  j["no_rope_layers"] = {1, 0};
  j["sliding_window"] = 4;
  j["layer_types"] = {"full_attention", "sliding_attention"};  // but use_sliding_window false
  expect_user_error(j, {"use_sliding_window", "disagree"});
  j = base("mistral", "MistralForCausalLM", 2);
  j["sliding_window"] = 4;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  expect_user_error(j, {"layer_types", "every layer"});
  j = base("llama", "LlamaForCausalLM", 2);
  j["sliding_window"] = 4;
  expect_user_error(j, {"sliding_window", "mistral"});
}

}  // namespace
}  // namespace trlhpc
