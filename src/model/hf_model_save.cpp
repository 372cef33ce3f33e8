// HfModelWriter and save_hf_model_dir (declared in hf_model_dir.hpp).
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"

namespace trlhpc {
namespace fs = std::filesystem;

const std::vector<std::string>& hf_tokenizer_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json",     "tokenizer_config.json", "vocab.json",          "merges.txt",
      "special_tokens_map.json", "added_tokens.json", "tokenizer.model", "chat_template.jinja",
      "generation_config.json"};
  return names;
}

namespace {

[[noreturn]] void throw_fs_failure(const std::string& what, const std::error_code& error) {
  throw RuntimeFailure(rank_prefix() + what + " failed: " + error.message());
}

// "out/model/" -> "out/model": so "<dir>.tmp" is a sibling, not a child.
fs::path normalized_dir(const std::string& dir) {
  fs::path path = fs::path(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  return path;
}

}  // namespace

void copy_hf_tokenizer_files(const std::string& source_dir, const std::string& dir_name) {
  const fs::path dir(dir_name);
  if (source_dir.empty()) return;
  for (const std::string& name : hf_tokenizer_file_names()) {
    const fs::path from = fs::path(source_dir) / name;
    std::error_code error;
    if (!fs::is_regular_file(from, error)) continue;
    fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing, error);
    if (error) throw_fs_failure("copying " + from.string() + " to " + dir.string(), error);
  }
}

HfModelWriter::HfModelWriter(const std::string& output_dir, const ModelConfig& config, const HfSaveOptions& options)
    : options_(options), specs_(parameter_specs(config)) {
  TRLHPC_ASSERT(options.dtype == DType::F32 || options.dtype == DType::BF16, "model files are saved as F32 or BF16");
  const fs::path target = normalized_dir(output_dir);
  target_ = target.string();
  std::error_code error;
  const bool exists = fs::exists(target, error);
  if (exists && !fs::is_directory(target, error))
    throw UserError(target_ + ": exists and is not a directory; choose another output directory");
  // An existing folder may be a file system of its own (a container's bind mount, a scratch mount
  // point): the files are staged inside it, so renaming them in never crosses file systems (EXDEV) and
  // the parent need not be writable. A new folder is staged as a sibling and renamed as a whole.
  temp_ = exists ? (target / ".model.tmp").string() : target_ + ".tmp";

  // A leftover staging folder is an interrupted earlier save by this writer: start it over.
  fs::remove_all(temp_, error);
  if (error) throw_fs_failure("removing the stale " + temp_, error);
  fs::create_directories(temp_, error);
  if (error) throw_fs_failure("creating " + temp_, error);

  ModelConfig saved = config;
  saved.torch_dtype = options.dtype == DType::BF16 ? "bfloat16" : "float32";
  saved.save((fs::path(temp_) / "config.json").string());
  std::vector<SafetensorsEntry> entries;
  for (const auto& spec : specs_) entries.push_back({spec.name, spec.shape});
  weights_ = std::make_unique<SafetensorsWriter>((fs::path(temp_) / "model.safetensors").string(), std::move(entries),
                                                 options.dtype);
}

HfModelWriter::~HfModelWriter() = default;

void HfModelWriter::append(const std::string& name, const float* data, int64_t numel) {
  TRLHPC_ASSERT(next_ < specs_.size() && specs_[next_].name == name && specs_[next_].numel() == numel,
                "HfModelWriter: got " + name + " (" + std::to_string(numel) + " elements), expected " +
                    (next_ < specs_.size() ? specs_[next_].name + " (" + std::to_string(specs_[next_].numel()) + ")"
                                           : std::string("no more parameters")));
  weights_->append(data, numel);
  ++next_;
}

void HfModelWriter::finish() {
  TRLHPC_ASSERT(next_ == specs_.size(), "HfModelWriter: " + std::to_string(next_) + " of " +
                                            std::to_string(specs_.size()) + " parameters appended before finish()");
  weights_->finish();
  copy_hf_tokenizer_files(options_.tokenizer_source_dir, temp_);

  const fs::path target(target_);
  std::error_code error;
  if (!fs::exists(target, error)) {
    if (target.has_parent_path()) fs::create_directories(target.parent_path(), error);
    fs::rename(temp_, target, error);
    if (error) throw_fs_failure("renaming " + temp_ + " to " + target_, error);
    return;
  }
  // An existing directory keeps its other contents; each complete file replaces its old version.
  for (const auto& entry : fs::directory_iterator(temp_)) {
    fs::rename(entry.path(), target / entry.path().filename(), error);
    if (error) throw_fs_failure("moving " + entry.path().string() + " into " + target_, error);
  }
  fs::remove(temp_, error);
}

void save_hf_model_dir(const std::string& output_dir, const ModelConfig& config, const ParameterSource& source,
                       const HfSaveOptions& options) {
  HfModelWriter writer(output_dir, config, options);
  std::vector<float> buffer;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    buffer.assign(static_cast<size_t>(spec.numel()), 0.0f);
    source(spec, buffer.data());
    writer.append(spec.name, buffer.data(), spec.numel());
  }
  writer.finish();
}

}  // namespace trlhpc
