#include "trlhpc/model/peft_adapter.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace fs = std::filesystem;

bool is_peft_adapter_dir(const std::string& dir) {
  std::error_code error;
  return fs::is_regular_file(fs::path(dir) / kPeftConfigFile, error);
}

namespace {

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw UserError(file.string() + ": cannot be read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(file.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// A key that must be absent, null, false or empty for trlhpc to train the adapter as PEFT would.
void require_unset(const nlohmann::json& config, const std::string& key, const fs::path& file, const std::string& why) {
  if (!config.contains(key)) return;
  const nlohmann::json& v = config[key];
  if (v.is_null() || v == false || (v.is_object() && v.empty()) || (v.is_array() && v.empty()) || v == "none") return;
  throw UserError(file.string() + ": \"" + key + "\": " + v.dump() + " is not supported (" + why + ")");
}

}  // namespace

PeftAdapterDir::PeftAdapterDir(const std::string& dir) : dir_(dir) {
  const fs::path file = fs::path(dir) / kPeftConfigFile;
  const nlohmann::json config = read_json(file);
  if (!config.is_object()) throw UserError(file.string() + ": expected a JSON object");
  const std::string type = config.value("peft_type", "");
  if (type != "LORA")
    throw UserError(file.string() + ": peft_type \"" + type + "\": trlhpc trains LoRA adapters only (peft_type LORA)");
  try {
    lora_.r = config.at("r").get<int64_t>();
    lora_.alpha = config.at("lora_alpha").get<double>();
    lora_.dropout = config.value("lora_dropout", 0.0);
    lora_.use_rslora = config.value("use_rslora", false);
    const nlohmann::json& targets = config.at("target_modules");
    lora_.target_modules.clear();
    if (targets.is_string()) {
      // A string is a regular expression to PEFT; only its "all-linear" shorthand is taken here.
      if (targets.get<std::string>() != "all-linear")
        throw UserError(file.string() + ": target_modules \"" + targets.get<std::string>() +
                        "\" is a regular expression, which trlhpc does not match; list the module names instead");
      lora_.target_modules.push_back("all-linear");
    } else {
      for (const auto& t : targets) lora_.target_modules.push_back(t.get<std::string>());
    }
    if (config.contains("modules_to_save") && !config["modules_to_save"].is_null())
      for (const auto& m : config["modules_to_save"]) lora_.modules_to_save.push_back(m.get<std::string>());
    base_name_ = config.value("base_model_name_or_path", nlohmann::json()).is_string()
                     ? config["base_model_name_or_path"].get<std::string>() : "";
  } catch (const nlohmann::json::exception& e) {
    throw UserError(file.string() + ": a LoRA adapter config needs r, lora_alpha and target_modules (" + e.what() + ")");
  }
  require_unset(config, "use_dora", file, "DoRA adapters cannot be trained by trlhpc");
  require_unset(config, "ensure_weight_tying", file, "trained copies of a tied embedding and head stay two tensors, as "
                "PEFT's default makes them");
  require_unset(config, "trainable_token_indices", file, "train the whole embedding with modules_to_save instead");
  require_unset(config, "layers_to_transform", file, "adapters on only some layers are not supported");
  require_unset(config, "rank_pattern", file, "every adapter has the one rank r");
  require_unset(config, "alpha_pattern", file, "every adapter has the one lora_alpha");
  require_unset(config, "bias", file, "adapter biases are not trained");
  require_unset(config, "fan_in_fan_out", file, "Qwen2/Llama linears are (out, in)");
  if (!base_name_.empty()) {
    std::error_code error;
    if (fs::is_directory(base_name_, error)) base_dir_ = base_name_;
    else if (fs::is_directory(fs::path(dir) / base_name_, error))
      base_dir_ = fs::absolute(fs::path(dir) / base_name_).lexically_normal().string();
  }
}

void PeftAdapterDir::check_weights(const ModelConfig& config, const LoraTargets& targets) {
  const fs::path file = fs::path(dir_) / kPeftWeightsFile;
  std::error_code error;
  if (!fs::is_regular_file(file, error))
    throw UserError(file.string() + ": missing (a PEFT adapter directory holds adapter_config.json and "
                    "adapter_model.safetensors)");
  weights_ = std::make_unique<SafetensorsReader>(file.string());
  std::set<std::string> expected;
  for (const ParameterSpec& spec : lora_parameter_specs(config, lora_, targets)) {
    const std::string key = peft_key(spec.name);
    expected.insert(key);
    if (!weights_->contains(key))
      throw UserError(file.string() + ": no tensor " + key + ": the adapter was not made for this model and "
                      "target_modules, or was saved by another PEFT layout");
    const Shape& shape = weights_->info(key).shape;
    if (shape != spec.shape)
      throw UserError(file.string() + ": " + key + " has shape " + shape_string(shape) + ", the model needs " +
                      shape_string(spec.shape) + ": an adapter of another base model (check base_model_name_or_path)");
    const std::vector<float> values = weights_->read_f32(key);
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        throw UserError(file.string() + ": " + key + " element " + std::to_string(i) + " is " +
                        (std::isnan(values[i]) ? "NaN" : "infinite") + "; use an earlier adapter or checkpoint");
  }
  for (const SafetensorsTensorInfo& info : weights_->tensors())
    if (!expected.count(info.name))
      throw UserError(file.string() + ": unexpected tensor " + info.name +
                      " (trlhpc trains lora_A/lora_B of the layers' linears and the modules_to_save copies of "
                      "embed_tokens, model.norm and lm_head; check modules_to_save in " + kPeftConfigFile + ")");
}

void save_peft_adapter(const std::string& dir, const ModelConfig& config, const LoraConfig& lora,
                       const LoraTargets& targets, const std::string& base_model_name, const AdapterSource& source) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw RuntimeFailure(rank_prefix() + "creating " + dir + " failed: " + error.message());
  const std::vector<ParameterSpec> specs = lora_parameter_specs(config, lora, targets);
  std::vector<SafetensorsEntry> entries;
  for (const ParameterSpec& spec : specs) entries.push_back({peft_key(spec.name), spec.shape});
  SafetensorsWriter writer((fs::path(dir) / kPeftWeightsFile).string(), std::move(entries), DType::F32);
  std::vector<float> buffer;
  for (const ParameterSpec& spec : specs) {
    buffer.assign(static_cast<size_t>(spec.numel()), 0.0f);
    source(spec, buffer.data());
    writer.append(buffer.data(), spec.numel());
  }
  writer.finish();

  // PEFT writes the resolved module names ("all-linear" expanded); others as the user gave them.
  nlohmann::json modules = nlohmann::json::array();
  for (const std::string& key : lora.target_modules) {
    if (key != "all-linear") {
      modules.push_back(key);
      continue;
    }
    for (LoraModule m : kLoraModules) modules.push_back(lora_module_name(m));
  }
  const nlohmann::json config_json = {
      {"peft_type", "LORA"},           {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model_name.empty() ? nlohmann::json() : nlohmann::json(base_model_name)},
      {"r", lora.r},                   {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},  {"target_modules", modules},
      {"use_rslora", lora.use_rslora}, {"use_dora", false},
      {"bias", "none"},                {"fan_in_fan_out", false},
      {"modules_to_save", lora.modules_to_save.empty() ? nlohmann::json() : nlohmann::json(lora.modules_to_save)},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},     {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()}, {"init_lora_weights", true},
      {"inference_mode", true},        {"revision", nullptr}};
  const fs::path file = fs::path(dir) / kPeftConfigFile, temp = fs::path(dir) / ".adapter_config.json.tmp";
  {
    std::ofstream out(temp);
    out << config_json.dump(2) << "\n";
    if (!out.flush()) throw RuntimeFailure(rank_prefix() + "writing " + temp.string() + " failed");
  }
  fs::rename(temp, file, error);
  if (error) throw RuntimeFailure(rank_prefix() + "renaming " + temp.string() + " failed: " + error.message());
}

}  // namespace trlhpc
