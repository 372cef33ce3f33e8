// HfModelDir: reading a Hugging Face model directory. Saving is in hf_model_save.cpp.
#include "trlhpc/model/hf_model_dir.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace fs = std::filesystem;

HfModelDir::HfModelDir(const std::string& dir) : dir_(dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw UserError(dir + ": not a directory; expected a Hugging Face model directory (config.json + "
                          "model.safetensors or model.safetensors.index.json)");
  config_ = ModelConfig::from_file((fs::path(dir) / "config.json").string());
  parameters_ = parameter_specs(config_);

  // transformers looks for the single file first, then the sharded index.
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single, error)) open_single(single.string());
  else if (fs::exists(index, error)) open_sharded(index.string());
  else
    throw UserError(dir + ": no model.safetensors or model.safetensors.index.json; trlhpc reads safetensors "
                          "weights (re-save the model with save_pretrained(..., safe_serialization=True))");
  check_parameters();
  check_finite();
}

void HfModelDir::open_single(const std::string& file) {
  files_.push_back(std::make_unique<SafetensorsReader>(file));
  for (const auto& info : files_.back()->tensors()) location_[info.name] = 0;
}

void HfModelDir::open_sharded(const std::string& index_file) {
  std::ifstream in(index_file);
  if (!in) throw UserError(index_file + ": cannot open; check permissions");
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(index_file + ": not valid JSON (" + e.what() + "); re-download or re-save the model");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw UserError(index_file + ": no \"weight_map\" object mapping tensor names to shard files");

  std::map<std::string, size_t> shard_of_file;  // shard file name -> index into files_
  for (const auto& [name, value] : index["weight_map"].items()) {
    if (!value.is_string())
      throw UserError(index_file + ": weight_map entry '" + name + "' is not a file name");
    const std::string file = value.get<std::string>();
    const fs::path relative(file);
    if (relative.is_absolute() || std::any_of(relative.begin(), relative.end(), [](const fs::path& p) { return p == ".."; }))
      throw UserError(index_file + ": weight_map entry '" + name + "' points outside the directory: " + file);
    auto it = shard_of_file.find(file);
    if (it == shard_of_file.end()) {
      const fs::path shard = fs::path(dir_) / relative;
      std::error_code error;
      if (!fs::is_regular_file(shard, error))
        throw UserError(index_file + ": shard " + file + " (holding '" + name + "') is missing from " + dir_ +
                        "; download every shard the index lists");
      files_.push_back(std::make_unique<SafetensorsReader>(shard.string()));
      it = shard_of_file.emplace(file, files_.size() - 1).first;
    }
    if (!files_[it->second]->contains(name))
      throw UserError(index_file + ": tensor '" + name + "' is listed in " + file + " but that file does not hold it");
    location_[name] = it->second;
  }
}

void HfModelDir::check_parameters() const {
  for (const ParameterSpec& spec : parameters_) {
    if (!has_tensor(spec.name)) {
      std::string hint = spec.name == "lm_head.weight"
                             ? " (config.json says tie_word_embeddings false; set it to true if the head is tied)"
                             : "; is config.json the one of these weights?";
      throw UserError(dir_ + ": tensor '" + spec.name + "' of shape " + shape_string(spec.shape) +
                      " is missing from the model files" + hint);
    }
    const auto& info = tensor_info(spec.name);
    if (info.shape != spec.shape)
      throw UserError(file_of(spec.name).path() + ": tensor '" + spec.name + "' has shape " + shape_string(info.shape) +
                      " but config.json implies " + shape_string(spec.shape) +
                      "; the config and the weights do not belong together");
  }
}

// Every rank reads every parameter once (transformers' from_pretrained loads all of them on every rank
// too): a rank that read only its shard would be the only one to see the NaN, and the others would wait
// for it in the first collective. Weights that are not finite otherwise show up steps later as a NaN
// loss, whose message suggests a lower learning rate.
void HfModelDir::check_finite() const {
  constexpr int64_t kPiece = int64_t{1} << 20;
  std::vector<float> piece;
  for (const ParameterSpec& spec : parameters_) {
    const int64_t n = spec.numel();
    piece.resize(static_cast<size_t>(std::min(n, kPiece)));
    for (int64_t begin = 0; begin < n; begin += kPiece) {
      const int64_t end = std::min(n, begin + kPiece);
      read_tensor(spec.name, begin, end, piece.data());
      for (int64_t i = begin; i < end; ++i) {
        const float v = piece[static_cast<size_t>(i - begin)];
        if (std::isfinite(v)) continue;
        throw UserError(file_of(spec.name).path() + ": tensor '" + spec.name + "' holds " +
                        (std::isnan(v) ? "NaN" : "an infinite value") + " at flat element " + std::to_string(i) +
                        " of " + std::to_string(n) + " (shape " + shape_string(spec.shape) +
                        "); these weights cannot be trained or run: use an undamaged copy of the model (a run "
                        "that diverged saves such weights; so can a broken conversion)");
      }
    }
  }
}

const SafetensorsReader& HfModelDir::file_of(const std::string& name) const {
  auto it = location_.find(name);
  if (it == location_.end()) throw UserError(dir_ + ": no tensor named '" + name + "' in the model files");
  return *files_[it->second];
}

void HfModelDir::read_tensor(const std::string& name, int64_t begin, int64_t end, float* out) const {
  file_of(name).read_f32(name, begin, end, out);
}

void HfModelDir::read_parameter(const ParameterSpec& spec, int64_t begin, int64_t end, float* out) const {
  read_tensor(spec.name, begin, end, out);
}

void HfModelDir::read_flat_range(const std::vector<ParameterSpec>& specs, int64_t begin, int64_t end,
                                 float* out) const {
  TRLHPC_ASSERT(0 <= begin && begin <= end, "bad flat read range");
  int64_t offset = 0;  // flat index where the current spec starts
  for (const ParameterSpec& spec : specs) {
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + spec.numel());
    if (lo < hi) read_parameter(spec, lo - offset, hi - offset, out + (lo - begin));
    offset += spec.numel();
  }
  if (end > offset) std::fill(out + (std::max(begin, offset) - begin), out + (end - begin), 0.0f);
}

}  // namespace trlhpc
