#include "trlhpc/train/checkpoint/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"

namespace trlhpc::checkpoint {
namespace fs = std::filesystem;

std::string checkpoint_dir(const std::string& output_dir, int64_t step) {
  return (fs::path(output_dir) / ("checkpoint-" + std::to_string(step))).string();
}

std::vector<std::pair<int64_t, std::string>> committed_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint-";
    if (name.rfind(prefix, 0) != 0 || !entry.is_directory()) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;  // checkpoint-N.tmp and the like
    if (!fs::exists(entry.path() / kManifestFile)) continue;
    found.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string resolve_checkpoint(const std::string& request, const std::string& output_dir) {
  if (request == "auto") {
    const auto all = committed_checkpoints(output_dir);
    return all.empty() ? "" : all.back().second;
  }
  if (request == "latest") {
    const auto all = committed_checkpoints(output_dir);
    if (all.empty())
      throw UserError("--resume_from_checkpoint latest: " + output_dir +
                      " holds no committed checkpoint (a checkpoint-STEP folder with " + kManifestFile +
                      "); train with --save_steps N first, or name a checkpoint folder");
    // The newest committed checkpoint-N, as HF's get_last_checkpoint. The `latest` file may name the one
    // before it (a job killed between a checkpoint's rename and the update of `latest`), which is why
    // the scan decides; checkpoints of two runs in one folder are prevented when a fresh run starts
    // (train/output_dir.hpp), so the scan finds this run's newest.
    return all.back().second;
  }
  if (!fs::is_directory(request))
    throw UserError("--resume_from_checkpoint " + request + ": no such folder; pass a checkpoint-STEP folder or latest");
  return request;
}

namespace {

// The fields resuming reads, with the types it reads them as: a manifest is a file on disk that may
// have been edited or damaged, and every rank must refuse it with the same UserError.
void check_manifest_fields(const std::string& dir, const nlohmann::json& m) {
  auto bad = [&](const std::string& field, const char* want) {
    throw UserError("checkpoint " + dir + ": " + kManifestFile + " field \"" + field + "\" must be " + want +
                    "; the manifest is damaged: resume from another checkpoint");
  };
  for (const char* key : {"step", "num_tokens", "optimizer_step"})
    if (m.contains(key) && !(m[key].is_number_integer() && m[key].get<int64_t>() >= 0)) bad(key, "a non-negative integer");
  if (m.contains("epoch") && !m["epoch"].is_number()) bad("epoch", "a number");
  if (m.contains("identity") && !m["identity"].is_object()) bad("identity", "an object");
  if (m.contains("sampler")) {
    if (!m["sampler"].is_object()) bad("sampler", "an object {\"epoch\", \"step\"}");
    for (const char* key : {"epoch", "step"})
      if (m["sampler"].contains(key) && !(m["sampler"][key].is_number_integer() && m["sampler"][key].get<int64_t>() >= 0))
        bad(std::string("sampler.") + key, "a non-negative integer");
  }
  if (!m.contains("datasets")) return;
  if (!m["datasets"].is_object()) bad("datasets", "an object of {\"checksum\": ...} per dataset");
  for (const auto& [name, entry] : m["datasets"].items())
    if (!entry.is_object() || (entry.contains("checksum") && !entry["checksum"].is_string()))
      bad("datasets." + name, "an object with a string \"checksum\"");
}

}  // namespace

nlohmann::json read_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifestFile;
  std::ifstream in(path);
  if (!in)
    throw UserError("checkpoint " + dir + " has no " + kManifestFile +
                    ": it is not a checkpoint, or its save did not finish (the manifest is written last); "
                    "resume from an earlier one (--resume_from_checkpoint latest picks the newest complete one)");
  // A manifest nests a few levels; refusing deep nesting keeps the recursive identity comparison and
  // dump() within the stack for a damaged or crafted file.
  const nlohmann::json::parser_callback_t shallow = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxManifestNesting)
      throw UserError("manifest nests deeper than " + std::to_string(kMaxManifestNesting) + " levels (kMaxManifestNesting)");
    return true;
  };
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(in, shallow, /*allow_exceptions=*/false);
  } catch (const UserError& e) {
    throw UserError("checkpoint " + dir + ": " + kManifestFile + " " + e.what() + "; the manifest is damaged");
  }
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("format") ||
      manifest["format"] != "trlhpc-checkpoint")
    throw UserError("checkpoint " + dir + ": " + kManifestFile + " is not a trlhpc checkpoint manifest");
  const nlohmann::json& version_field = manifest.contains("format_version") ? manifest["format_version"] : nlohmann::json(0);
  const int version = version_field.is_number_integer() && version_field.get<int64_t>() >= 0 && version_field.get<int64_t>() < 1000000
                          ? static_cast<int>(version_field.get<int64_t>())
                          : 0;
  if (version > kFormatVersion)
    throw UserError("checkpoint " + dir + " has format version " + std::to_string(version) + "; this trlhpc reads up to " +
                    std::to_string(kFormatVersion) + ": resume it with a newer trlhpc");
  if (version < 1) throw UserError("checkpoint " + dir + ": " + kManifestFile + " has no valid format_version");
  check_manifest_fields(dir, manifest);
  if (!fs::exists(fs::path(dir) / kStateFile))
    throw UserError("checkpoint " + dir + " has a manifest but no " + kStateFile + ": the folder is incomplete");
  return manifest;
}

namespace {

// The first difference between `saved` and `current` at path `where`, naming them as saved_name and
// current_name ("checkpoint", "this run"); "" when equal.
std::string first_difference(const nlohmann::json& saved, const nlohmann::json& current, const std::string& where,
                             const char* saved_name = "checkpoint", const char* current_name = "this run") {
  // Numbers compare by value (a parsed 910 is unsigned, a computed one signed).
  if (saved.is_object() != current.is_object() || saved.is_array() != current.is_array() ||
      (!saved.is_structured() && saved != current))
    return where + ": " + saved_name + " " + saved.dump() + ", " + current_name + " " + current.dump();
  if (saved.is_object()) {
    for (auto it = saved.begin(); it != saved.end(); ++it) {
      if (!current.contains(it.key())) return where + "." + it.key() + ": missing in " + current_name;
      const std::string d =
          first_difference(it.value(), current.at(it.key()), where + "." + it.key(), saved_name, current_name);
      if (!d.empty()) return d;
    }
    for (auto it = current.begin(); it != current.end(); ++it)
      if (!saved.contains(it.key())) return where + "." + it.key() + ": missing in " + saved_name;
  }
  if (saved.is_array()) {
    if (saved.size() != current.size())
      return where + ": " + std::to_string(saved.size()) + " entries in " + saved_name + ", " +
             std::to_string(current.size()) + " in " + current_name;
    for (size_t i = 0; i < saved.size(); ++i) {
      const std::string d =
          first_difference(saved[i], current[i], where + "[" + std::to_string(i) + "]", saved_name, current_name);
      if (!d.empty()) return d;
    }
  }
  return "";
}

}  // namespace

void require_same_identity(const std::string& dir, const nlohmann::json& saved, const nlohmann::json& current) {
  struct Part {
    const char* key;
    const char* what;
  };
  for (const Part& part : {Part{"parameters", "another model shape"}, Part{"model_config", "another model config"},
                           Part{"tokenizer_fingerprint", "another tokenizer"},
                           // Before the dataset: another seed reorders the packing shuffle, so the dataset
                           // would differ too and be blamed.
                           Part{"seed", "another --seed (it decides the data order and the packing shuffle)"},
                           Part{"dataset", "another dataset (its rows, their order, or packing / max_length)"},
                           Part{"global_batch_size", "another global batch (per_device x dp x accumulation)"},
                           Part{"rows_per_epoch",
                                "another --dataloader_drop_last (or, with it, another per_device x dp)"}}) {
    if (!current.contains(part.key)) continue;
    if (!saved.contains(part.key))
      throw UserError("--resume_from_checkpoint " + dir + ": the checkpoint does not record its " + part.key +
                      " (it was saved by an earlier trlhpc), so it cannot be checked against this run; resume it "
                      "with the trlhpc that saved it, or start afresh");
    const nlohmann::json& want = saved.at(part.key);
    const nlohmann::json& have = current.at(part.key);
    const std::string d = first_difference(want, have, part.key);
    if (!d.empty())
      throw UserError("--resume_from_checkpoint " + dir + ": " + part.what + " than the checkpoint (" + d +
                      "); resume with the model, tokenizer, seed, dataset and global batch (and --dataloader_drop_last) it was saved with");
  }
  // The sampler's seed: data_seed, recorded only when set, else seed (so manifests without it read as before).
  auto sampler_seed = [](const nlohmann::json& id) {
    return id.contains("data_seed") ? id["data_seed"] : id.value("seed", nlohmann::json());
  };
  if (current.contains("seed") && saved.contains("seed") && sampler_seed(saved) != sampler_seed(current))
    throw UserError("--resume_from_checkpoint " + dir + ": another data order than the checkpoint (its sampler seed, "
                    "--data_seed or else --seed, was " + sampler_seed(saved).dump() + ", this run's is " +
                    sampler_seed(current).dump() + "); resume with the --data_seed it was saved with");
}

void require_same_manifest(const std::string& dir, const nlohmann::json& manifest_file, const nlohmann::json& embedded) {
  const std::string copy = std::string("the copy in ") + kStateFile;
  const std::string d = first_difference(embedded, manifest_file, "manifest", copy.c_str(), kManifestFile);
  if (d.empty()) return;
  throw UserError("checkpoint " + dir + ": " + kManifestFile + " does not match the manifest written inside " +
                  kStateFile + " with the tensors (" + d + "): " + kManifestFile +
                  " was edited or belongs to another checkpoint; restore it, or resume from another checkpoint");
}

std::string tokenizer_fingerprint(const std::string& dir) {
  if (dir.empty()) return "";
  uint64_t hash = 1469598103934665603ull;  // FNV-1a 64
  auto feed = [&](const std::string& bytes) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  };
  bool any = false;
  for (const std::string& name : hf_tokenizer_file_names()) {
    if (name == "generation_config.json") continue;  // sampling defaults: no effect on the token ids
    std::ifstream in(fs::path(dir) / name, std::ios::binary);
    if (!in) continue;
    any = true;
    feed(name);
    feed(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  if (!any) return "";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace trlhpc::checkpoint
