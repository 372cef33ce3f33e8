#pragma once
// The Qwen2.5-0.5B shape (config.json of Qwen/Qwen2.5-0.5B) with `layers` decoder layers, shared by the
// checkpoint benchmarks: hidden 896, intermediate 4864, 14 heads / 2 kv heads, vocab 151936, tied.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/model/model_config.hpp"

namespace trlhpc::bench {

inline ModelConfig qwen25_05b_config(int64_t layers, const std::string& source) {
  nlohmann::json j = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"},
                      {"hidden_size", 896}, {"intermediate_size", 4864},
                      {"num_hidden_layers", layers}, {"num_attention_heads", 14},
                      {"num_key_value_heads", 2}, {"vocab_size", 151936}, {"max_position_embeddings", 32768},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", true},
                      {"initializer_range", 0.02}};
  return ModelConfig::from_json(j, source);
}

}  // namespace trlhpc::bench
