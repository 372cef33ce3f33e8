#include "trlhpc/train/checkpoint/state_index.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc::checkpoint {
namespace {

// Far above any real tensor or unit (2^40 fp32 elements = 4 TiB), low enough that offsets, sums and
// byte counts of valid entries never overflow int64.
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool is_count(const nlohmann::json& v, int64_t max) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= max;
}

// "unit-U": the only unit names trlhpc writes, so a crafted name cannot point into another group of the file.
bool is_unit_name(const std::string& s) {
  const std::string prefix = "unit-";
  return s.size() > prefix.size() && s.size() <= prefix.size() + 9 && s.rfind(prefix, 0) == 0 &&
         std::all_of(s.begin() + static_cast<std::ptrdiff_t>(prefix.size()), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string unit_dataset_suffix(int unit) { return "unit-" + std::to_string(unit); }

StateIndex StateIndex::from_manifest(const std::string& dir, const nlohmann::json& manifest) {
  StateIndex index;
  index.manifest_path_ = (std::filesystem::path(dir) / kManifestFile).string();
  const nlohmann::json& version = manifest.contains("format_version") ? manifest["format_version"] : nlohmann::json(1);
  index.version_ = version.is_number_integer() ? static_cast<int>(version.get<int64_t>()) : 1;
  const nlohmann::json datasets = manifest.value("datasets", nlohmann::json::object());
  // A --save_only_model checkpoint lists the params of each tensor only (no AdamW moments).
  const bool model_only = manifest.contains("save_only_model") && manifest["save_only_model"] == true;
  if (index.version_ < 2) {
    index.v1_datasets_ = datasets;
    return index;
  }
  auto damaged = [&](const std::string& what) {
    throw UserError("checkpoint " + dir + ": " + index.manifest_path_ + " " + what +
                    "; the manifest is damaged: resume from another checkpoint");
  };
  if (!manifest.contains("tensors") || !manifest["tensors"].is_object())
    damaged("has no tensor index (\"tensors\", an object; format version " + std::to_string(index.version_) + ")");
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> extents;  // unit -> [offset, end) of its tensors
  for (const auto& [name, entry] : manifest["tensors"].items()) {
    const std::string where = "tensor index entry \"" + name + "\"";
    if (!entry.is_object()) damaged(where + " is not an object");
    Entry e;
    if (!entry.contains("unit") || !entry["unit"].is_string() || !is_unit_name(entry["unit"].get<std::string>()))
      damaged(where + " has no \"unit\" of the form \"unit-N\"");
    e.unit = entry["unit"].get<std::string>();
    if (!entry.contains("offset") || !is_count(entry["offset"], kMaxElements))
      damaged(where + " has no \"offset\" (an integer from 0 to 2^40)");
    e.offset = entry["offset"].get<int64_t>();
    const nlohmann::json& shape = entry.contains("shape") ? entry["shape"] : nlohmann::json();
    if (!shape.is_array() || shape.empty() || shape.size() > 2)
      damaged(where + " has no \"shape\" of one or two dimensions");
    int64_t numel = 1;
    for (const auto& d : shape) {
      if (!is_count(d, kMaxElements) || d.get<int64_t>() == 0) damaged(where + ": \"shape\" holds " + d.dump());
      numel *= d.get<int64_t>();
      if (numel > kMaxElements) damaged(where + ": \"shape\" has more than 2^40 elements");
      e.shape.push_back(d.get<int64_t>());
    }
    const nlohmann::json& checksums = entry.contains("checksums") ? entry["checksums"] : nlohmann::json();
    for (const char* kind : kStateKinds) {
      if (model_only && std::string(kind) != kStateKinds[0]) break;  // params only (save_only_model)
      if (!checksums.is_object() || !checksums.contains(kind) || !checksums[kind].is_string())
        damaged(where + " has no \"checksums\" entry \"" + kind + "\"");
      e.checksums[kind] = checksums[kind].get<std::string>();
      const std::string dataset = std::string(kind) + "/" + e.unit;
      const nlohmann::json* size = datasets.contains(dataset) && datasets[dataset].contains("shape")
                                       ? &datasets[dataset]["shape"]
                                       : nullptr;
      if (!size || !size->is_array() || size->size() != 1 || !is_count((*size)[0], kMaxElements))
        damaged(where + " is in unit " + e.unit + ", but \"datasets\" has no 1-D \"" + dataset + "\"");
      index.packed_sizes_[dataset] = (*size)[0].get<int64_t>();
      if (e.offset + numel > index.packed_sizes_[dataset])
        damaged(where + " ends at element " + std::to_string(e.offset + numel) + ", past the end of dataset " + dataset +
                " (" + std::to_string(index.packed_sizes_[dataset]) + " elements)");
    }
    extents[e.unit].emplace_back(e.offset, e.offset + numel);
    index.tensors_.emplace(name, std::move(e));
  }
  for (auto& [unit, spans] : extents) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second)
        damaged("tensor index: two tensors of " + unit + " overlap at element " + std::to_string(spans[i].first));
  }
  return index;
}

TensorLocation StateIndex::locate(const std::string& kind, const std::string& name) const {
  TensorLocation location;
  if (version_ < 2) {
    location.dataset = kind + "/" + name;
    if (v1_datasets_.contains(location.dataset))
      location.checksum = v1_datasets_[location.dataset].value("checksum", std::string());
    return location;
  }
  const auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw UserError(manifest_path_ + ": the tensor index (\"tensors\") has no entry for " + name +
                    ": the manifest is damaged or of another model; resume from another checkpoint");
  const Entry& e = it->second;
  location.dataset = kind + "/" + e.unit;
  location.packed = true;
  location.offset = e.offset;
  location.shape = e.shape;
  const auto sum = e.checksums.find(kind);
  if (sum == e.checksums.end())
    throw UserError(manifest_path_ + " holds no " + kind + " of " + name +
                    " (a --save_only_model checkpoint holds the model only): resume from a checkpoint saved without it");
  location.checksum = sum->second;
  return location;
}

Shape StateIndex::packed_dataset_shape(const std::string& dataset) const {
  const auto it = packed_sizes_.find(dataset);
  TRLHPC_ASSERT(it != packed_sizes_.end(), "no packed dataset " + dataset + " in the index of " + manifest_path_);
  return {it->second};
}

}  // namespace trlhpc::checkpoint
