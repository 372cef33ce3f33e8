// Hugging Face model directories: loading stories260K (single file and re-sharded), validation errors,
// and save -> reload.
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;

std::string stories_dir() { return ::trlhpc::testing::shared_data_dir() + "/stories260K"; }

class HfModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ::trlhpc::testing::make_temp_dir("hfdir"); }
  void TearDown() override { fs::remove_all(dir_); }

  // A model dir under dir_ with stories260K's config and the given tensors (taken from stories260K).
  std::string make_dir(const std::string& name, const ModelConfig& config,
                       const std::vector<std::pair<std::string, Shape>>& tensors) {
    const std::string path = dir_ + "/" + name;
    fs::create_directories(path);
    config.save(path + "/config.json");
    SafetensorsReader source(stories_dir() + "/model.safetensors");
    std::vector<std::vector<float>> data;
    std::vector<SafetensorsTensorRef> refs;
    for (const auto& [tensor, shape] : tensors) {
      data.emplace_back(static_cast<size_t>(shape_numel(shape)), 0.5f);
      if (source.contains(tensor) && source.info(tensor).shape == shape) data.back() = source.read_f32(tensor);
      refs.push_back({tensor, shape, data.back().data()});
    }
    write_safetensors(path + "/model.safetensors", refs, DType::F32);
    return path;
  }

  static std::vector<std::pair<std::string, Shape>> stories_tensors(const ModelConfig& config) {
    std::vector<std::pair<std::string, Shape>> out;
    for (const auto& spec : parameter_specs(config)) out.emplace_back(spec.name, spec.shape);
    return out;
  }

  static void expect_user_error(const std::string& dir, std::initializer_list<std::string> needles) {
    try {
      HfModelDir model(dir);
      ADD_FAILURE() << dir << " was accepted";
    } catch (const UserError& e) {
      for (const auto& needle : needles) EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }

  static void expect_same_parameters(const HfModelDir& a, const HfModelDir& b) {
    ASSERT_EQ(a.parameters().size(), b.parameters().size());
    for (const auto& spec : a.parameters()) {
      std::vector<float> x(static_cast<size_t>(spec.numel())), y(x.size());
      a.read_parameter(spec, 0, spec.numel(), x.data());
      b.read_parameter(spec, 0, spec.numel(), y.data());
      ASSERT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << spec.name;
    }
  }

  std::string dir_;
};

TEST_F(HfModelDirTest, LoadsStories260K) {
  HfModelDir model(stories_dir());
  EXPECT_EQ(model.config().num_hidden_layers, 5);
  const auto& params = model.parameters();
  ASSERT_EQ(params.size(), 47u);
  EXPECT_EQ(params.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(params.front().unit, 0);
  EXPECT_EQ(params.back().name, "model.norm.weight");  // tied: no lm_head parameter
  EXPECT_EQ(params.back().unit, 6);
  EXPECT_FALSE(model.has_tensor("lm_head.weight"));
  int64_t total = 0;
  for (const auto& spec : params) {
    EXPECT_EQ(model.tensor_info(spec.name).shape, spec.shape) << spec.name;
    total += spec.numel();
  }
  EXPECT_EQ(total, model.config().parameter_count());
  EXPECT_EQ(model.tensor_info("model.layers.2.self_attn.k_proj.weight").shape, (Shape{32, 64}));

  // A flat read of unit 1 (layer 0) with padding equals the parameters one after another, then zeros.
  const auto unit = unit_parameter_specs(model.config(), 1);
  int64_t unit_size = 0;
  for (const auto& spec : unit) unit_size += spec.numel();
  std::vector<float> flat(static_cast<size_t>(unit_size + 5), -1.0f);
  model.read_flat_range(unit, 0, unit_size + 5, flat.data());
  int64_t offset = 0;
  for (const auto& spec : unit) {
    const auto want = model.file_of(spec.name).read_f32(spec.name);
    ASSERT_EQ(std::memcmp(flat.data() + offset, want.data(), want.size() * 4), 0) << spec.name;
    offset += spec.numel();
  }
  for (int64_t i = unit_size; i < unit_size + 5; ++i) EXPECT_EQ(flat[static_cast<size_t>(i)], 0.0f);
  std::vector<float> part(100);
  model.read_flat_range(unit, 4000, 4100, part.data());
  EXPECT_EQ(std::memcmp(part.data(), flat.data() + 4000, 400), 0);
}

TEST_F(HfModelDirTest, LoadsShardedIndex) {
  HfModelDir single(stories_dir());
  const std::string sharded = dir_ + "/sharded";
  fs::create_directories(sharded);
  fs::copy_file(stories_dir() + "/config.json", sharded + "/config.json");
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  const auto& params = single.parameters();
  std::vector<std::vector<float>> data;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    std::vector<SafetensorsTensorRef> refs;
    for (size_t i = shard * params.size() / 2; i < (shard + 1) * params.size() / 2; ++i) {
      data.push_back(single.file_of(params[i].name).read_f32(params[i].name));
      refs.push_back({params[i].name, params[i].shape, data.back().data()});
      index["weight_map"][params[i].name] = name;
    }
    write_safetensors(sharded + "/" + name, refs, DType::F32);
  }
  std::ofstream(sharded + "/model.safetensors.index.json") << index.dump(2);

  HfModelDir model(sharded);
  expect_same_parameters(single, model);
  EXPECT_NE(model.file_of(params.front().name).path(), model.file_of(params.back().name).path());

  fs::remove(sharded + "/model-00002-of-00002.safetensors");
  expect_user_error(sharded, {"model-00002-of-00002.safetensors", "missing"});
}

TEST_F(HfModelDirTest, ReportsMissingTensorsAndWrongShapes) {
  const ModelConfig config = ModelConfig::from_file(stories_dir() + "/config.json");
  auto tensors = stories_tensors(config);
  tensors.erase(tensors.begin() + 3);  // layer 0's k_proj
  expect_user_error(make_dir("missing", config, tensors),
                    {"model.layers.0.self_attn.k_proj.weight", "missing", "(32, 64)"});

  tensors = stories_tensors(config);
  tensors[5].second = {64, 32};  // o_proj stored with the wrong shape
  const std::string wrong = make_dir("wrong", config, tensors);
  expect_user_error(wrong, {"model.layers.0.self_attn.o_proj.weight", wrong + "/model.safetensors", "(64, 32)", "(64, 64)"});

  ModelConfig untied = config;
  untied.tie_word_embeddings = false;
  expect_user_error(make_dir("untied", untied, stories_tensors(config)), {"lm_head.weight", "tie_word_embeddings"});

  // An untied model with its head loads; a tied config ignores a stored head.
  const std::string with_head = make_dir("head", untied, stories_tensors(untied));
  EXPECT_EQ(HfModelDir(with_head).parameters().back().name, "lm_head.weight");
  fs::copy_file(stories_dir() + "/config.json", with_head + "/config.json", fs::copy_options::overwrite_existing);
  EXPECT_EQ(HfModelDir(with_head).parameters().back().name, "model.norm.weight");
}

TEST_F(HfModelDirTest, ReportsMissingDirectoryAndFiles) {
  expect_user_error(dir_ + "/nope", {dir_ + "/nope", "not a directory"});
  fs::create_directories(dir_ + "/empty");
  expect_user_error(dir_ + "/empty", {dir_ + "/empty/config.json"});
  fs::copy_file(stories_dir() + "/config.json", dir_ + "/empty/config.json");
  expect_user_error(dir_ + "/empty", {"no model.safetensors"});
}

TEST_F(HfModelDirTest, SaveAndReloadIsBitIdentical) {
  HfModelDir source(stories_dir());
  auto from_source = [&](const ParameterSpec& spec, float* out) { source.read_parameter(spec, 0, spec.numel(), out); };
  const std::string out = dir_ + "/out";
  save_hf_model_dir(out, source.config(), from_source, {DType::F32, stories_dir()});
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                           "generation_config.json"})
    EXPECT_TRUE(fs::exists(out + "/" + name)) << name;
  HfModelDir reloaded(out);
  EXPECT_EQ(reloaded.config().to_json(), source.config().to_json());
  expect_same_parameters(source, reloaded);
  EXPECT_EQ(reloaded.file_of("model.norm.weight").metadata().at("format"), "pt");

  // Saving again into an existing directory keeps its other files and replaces the model.
  std::ofstream(out + "/metrics.jsonl") << "{\"step\": 1}\n";
  save_hf_model_dir(out + "/", source.config(), from_source, {DType::BF16, ""});
  EXPECT_TRUE(fs::exists(out + "/metrics.jsonl"));
  EXPECT_TRUE(fs::exists(out + "/tokenizer.json"));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  HfModelDir bf16(out);
  EXPECT_EQ(bf16.config().torch_dtype, "bfloat16");
  EXPECT_EQ(bf16.tensor_info("model.embed_tokens.weight").dtype, "BF16");
  for (const auto& spec : source.parameters()) {
    const auto want = source.file_of(spec.name).read_f32(spec.name);
    const auto got = bf16.file_of(spec.name).read_f32(spec.name);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(want[i]))) << spec.name << i;
  }

  // bf16 -> save -> reload is exact.
  auto from_bf16 = [&](const ParameterSpec& spec, float* o) { bf16.read_parameter(spec, 0, spec.numel(), o); };
  save_hf_model_dir(dir_ + "/again", bf16.config(), from_bf16, {DType::BF16, ""});
  HfModelDir again(dir_ + "/again");
  expect_same_parameters(bf16, again);
}

// The Qwen3 fixture, saved by transformers (q_norm / k_norm per layer, tied head, head_dim 16 with
// hidden 32 over 4 heads): every tensor loads, and trlhpc's save reloads bit for bit with the same config.
TEST_F(HfModelDirTest, Qwen3SavedByTransformersLoadsAndSavesBack) {
  HfModelDir source(::trlhpc::testing::tests_dir() + "/golden/qwen3_tiny/model");
  ASSERT_EQ(source.config().architecture, ModelArchitecture::Qwen3);
  int norms = 0;
  for (const auto& spec : source.parameters())
    norms += spec.name.find("q_norm") != std::string::npos || spec.name.find("k_norm") != std::string::npos;
  EXPECT_EQ(norms, 2 * source.config().num_hidden_layers);
  auto from_source = [&](const ParameterSpec& spec, float* out) { source.read_parameter(spec, 0, spec.numel(), out); };
  save_hf_model_dir(dir_ + "/qwen3", source.config(), from_source, {DType::F32, ""});
  HfModelDir reloaded(dir_ + "/qwen3");
  EXPECT_EQ(reloaded.config().to_json(), source.config().to_json());
  expect_same_parameters(source, reloaded);
}

// The sliding-window and RoPE-less fixtures, saved by transformers 5: trlhpc's save reloads bit for bit
// and its config.json keeps every field transformers derives the layer pattern from with the value
// transformers itself wrote (so transformers loads the same windows, RoPE layers and head size back).
TEST_F(HfModelDirTest, SlidingWindowModelsSaveTheFieldsTransformersReads) {
  for (const std::string name :
       {"mistral_tiny", "qwen3_sliding_tiny", "smollm3_tiny", "gemma3_tiny", "gemma2_tiny"}) {
    SCOPED_TRACE(name);
    const std::string source_dir = ::trlhpc::testing::tests_dir() + "/golden/" + name + "/model";
    HfModelDir source(source_dir);
    auto from_source = [&](const ParameterSpec& spec, float* out) { source.read_parameter(spec, 0, spec.numel(), out); };
    save_hf_model_dir(dir_ + "/" + name, source.config(), from_source, {DType::F32, ""});
    HfModelDir reloaded(dir_ + "/" + name);
    EXPECT_EQ(reloaded.config().to_json(), source.config().to_json());
    expect_same_parameters(source, reloaded);
    const nlohmann::json theirs = nlohmann::json::parse(std::ifstream(source_dir + "/config.json"));
    const nlohmann::json ours = nlohmann::json::parse(std::ifstream(dir_ + "/" + name + "/config.json"));
    for (const char* field : {"architectures", "model_type", "sliding_window", "use_sliding_window", "max_window_layers",
                              "layer_types", "no_rope_layers", "no_rope_layer_interval", "head_dim",
                              "tie_word_embeddings", "attention_bias", "mlp_bias", "query_pre_attn_scalar",
                              "hidden_activation", "sliding_window_pattern", "attn_logit_softcapping",
                              "final_logit_softcapping", "use_bidirectional_attention"}) {
      if (!theirs.contains(field)) continue;
      EXPECT_TRUE(ours.contains(field)) << field;
      if (ours.contains(field)) EXPECT_EQ(ours[field], theirs[field]) << field;
    }
    EXPECT_TRUE(theirs.contains("sliding_window") && !theirs["sliding_window"].is_null());
  }
}

// Weights that are not finite are refused when the directory is opened, naming the file, the tensor and
// the element (before, they loaded and the first step failed with "lower --learning_rate").
TEST_F(HfModelDirTest, ReportsNonFiniteWeights) {
  HfModelDir source(stories_dir());
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    const std::string out = dir_ + (std::isnan(bad) ? "/nan" : "/inf");
    const std::string damaged = "model.layers.1.mlp.down_proj.weight";
    save_hf_model_dir(out, source.config(), [&](const ParameterSpec& spec, float* o) {
      source.read_parameter(spec, 0, spec.numel(), o);
      if (spec.name == damaged) o[37] = bad;
    }, {DType::BF16, ""});
    expect_user_error(out, {out + "/model.safetensors", "'" + damaged + "'", std::isnan(bad) ? "NaN" : "infinite",
                            "flat element 37 of"});
  }
}

TEST_F(HfModelDirTest, RefusesToReplaceAFile) {
  HfModelDir source(stories_dir());
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_THROW(save_hf_model_dir(dir_ + "/file", source.config(), [](const ParameterSpec&, float*) {}), UserError);
}

}  // namespace
}  // namespace trlhpc
