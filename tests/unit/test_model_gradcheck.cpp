// Whole-model gradient check: the decoder's hand-written backward against central finite differences
// of its own forward loss, for several elements of EVERY parameter tensor, on tiny configs of both
// architectures (Qwen2: untied, q/k/v bias, GQA; Llama: tied, attention + MLP biases, MQA, llama3 RoPE
// scaling) with a packed + padded batch, for the plain and the label-smoothed loss.
// Bound: forward in fp32 gives loss noise ~1e-7 absolute; with step h = 1e-2 the finite difference
// carries ~1e-5 noise plus O(h^2) truncation, so |fd - grad| <= 3e-4 + 3e-2 |grad| is tight enough to
// catch a wrong or missing term (those are O(|grad|)) and loose enough for fp32.
#include <cmath>

#include "test_support.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"

namespace trlhpc {
namespace {

ModelConfig tiny(const std::string& arch) {
  nlohmann::json j = {{"hidden_size", 16}, {"intermediate_size", 24}, {"num_hidden_layers", 2},
                      {"num_attention_heads", 4}, {"vocab_size", 37}, {"max_position_embeddings", 64},
                      {"rms_norm_eps", 1e-5}, {"initializer_range", 0.3}, {"hidden_act", "silu"}};
  if (arch == "qwen2") {
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["model_type"] = "qwen2";
    j["num_key_value_heads"] = 2;
    j["tie_word_embeddings"] = false;
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["num_key_value_heads"] = 1;
    j["tie_word_embeddings"] = true;
    j["attention_bias"] = true;
    j["mlp_bias"] = true;
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 4.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 2.0}, {"original_max_position_embeddings", 8}};
  }
  return ModelConfig::from_json(j, "test:" + arch);
}

// Two rows of 9: row 0 packs documents of 5 and 4 tokens, row 1 is 6 tokens + 3 padding.
Batch batch() {
  Batch b;
  b.rows = 2;
  b.seq_len = 9;
  const int docs[2][9] = {{0, 0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, -1, -1, -1}};
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 9; ++t) {
      b.input_ids.push_back((r * 13 + t * 7 + 3) % 37);
      b.doc_ids.push_back(docs[r][t]);
      int pos = 0;
      for (int u = t - 1; u >= 0 && docs[r][u] == docs[r][t]; --u) ++pos;
      b.positions.push_back(pos);
    }
  for (size_t i = 0; i < b.input_ids.size(); ++i) {
    const bool same_doc = (i + 1) % 9 != 0 && b.doc_ids[i] >= 0 && b.doc_ids[i + 1] == b.doc_ids[i];
    b.targets.push_back(same_doc ? b.input_ids[i + 1] : kIgnoreIndex);
  }
  return b;
}

class ModelGradCheck : public ::testing::TestWithParam<std::string> {};

// token_loss: label smoothing (--label_smoothing_factor) is a function of the parameters like the plain
// loss, so the same finite differences check it; DFT is not (its weight is detached: the finite
// difference would see it move), and tests/unit/test_cpu_token_loss.cpp checks it at the loss instead.
void check_every_parameter(const std::string& arch, const TokenLoss& token_loss) {
  const ModelConfig config = tiny(arch);
  auto ops = make_cpu_ops();
  ParameterStore store(config, *ops);
  load_all_units(weights_from_init(config, 7), *ops, store);
  Decoder decoder(config, *ops, store, /*gradient_checkpointing=*/false, /*loss_chunk_tokens=*/4, {}, {}, token_loss);
  const DeviceBatch db = DeviceBatch::upload(batch(), *ops);
  const int64_t n = batch().target_tokens();
  decoder.forward_backward(db, 1.0f / static_cast<float>(n));
  auto loss = [&] { return decoder.forward_loss(db).loss_sum / static_cast<double>(n); };

  int checked = 0;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    Tensor p = store.param(spec.name), g = store.grad(spec.name);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = (k * 7919 + 13) % p.numel();
      const float saved = p.f32()[i];
      const double h = 1e-2;
      p.f32()[i] = static_cast<float>(saved + h);
      const double up = loss();
      p.f32()[i] = static_cast<float>(saved - h);
      const double down = loss();
      p.f32()[i] = saved;
      const double fd = (up - down) / (2 * h), analytic = g.f32()[i];
      EXPECT_NEAR(analytic, fd, 3e-4 + 3e-2 * std::fabs(fd)) << spec.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * static_cast<int>(parameter_specs(config).size()));
}

TEST_P(ModelGradCheck, EveryParameterTensorAgreesWithFiniteDifferences) { check_every_parameter(GetParam(), {}); }

TEST_P(ModelGradCheck, LabelSmoothedLossAgreesWithFiniteDifferences) {
  check_every_parameter(GetParam(), TokenLoss{0.3f, false});
}

INSTANTIATE_TEST_SUITE_P(Architectures, ModelGradCheck, ::testing::Values("qwen2", "llama"));

}  // namespace
}  // namespace trlhpc
