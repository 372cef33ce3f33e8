// save_hf_model_dir (declared in hf_model_dir.hpp).
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hf_model_dir.hpp"

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

void write_model_files(const fs::path& dir, const ModelConfig& config, const ParameterSource& source,
                       const HfSaveOptions& options) {
  ModelConfig saved = config;
  saved.torch_dtype = options.dtype == DType::BF16 ? "bfloat16" : "float32";
  saved.save((dir / "config.json").string());

  const std::vector<ParameterSpec> specs = parameter_specs(config);
  std::vector<SafetensorsEntry> entries;
  for (const auto& spec : specs) entries.push_back({spec.name, spec.shape});
  SafetensorsWriter writer((dir / "model.safetensors").string(), std::move(entries), options.dtype);
  std::vector<float> buffer;
  for (const auto& spec : specs) {
    buffer.assign(static_cast<size_t>(spec.numel()), 0.0f);
    source(spec, buffer.data());
    writer.append(buffer.data(), spec.numel());
  }
  writer.finish();

  if (options.tokenizer_source_dir.empty()) return;
  for (const std::string& name : hf_tokenizer_file_names()) {
    const fs::path from = fs::path(options.tokenizer_source_dir) / name;
    std::error_code error;
    if (!fs::is_regular_file(from, error)) continue;
    fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing, error);
    if (error) throw_fs_failure("copying " + from.string() + " to " + dir.string(), error);
  }
}

}  // namespace

void save_hf_model_dir(const std::string& output_dir, const ModelConfig& config, const ParameterSource& source,
                       const HfSaveOptions& options) {
  TRLHPC_ASSERT(options.dtype == DType::F32 || options.dtype == DType::BF16, "model files are saved as F32 or BF16");
  const fs::path target = normalized_dir(output_dir);
  const fs::path temp = target.string() + ".tmp";
  std::error_code error;
  if (fs::exists(target, error) && !fs::is_directory(target, error))
    throw UserError(target.string() + ": exists and is not a directory; choose another output directory");

  // A leftover <dir>.tmp is an interrupted earlier save by this function: start it over.
  fs::remove_all(temp, error);
  if (error) throw_fs_failure("removing the stale " + temp.string(), error);
  fs::create_directories(temp, error);
  if (error) throw_fs_failure("creating " + temp.string(), error);
  write_model_files(temp, config, source, options);

  if (!fs::exists(target, error)) {
    if (target.has_parent_path()) fs::create_directories(target.parent_path(), error);
    fs::rename(temp, target, error);
    if (error) throw_fs_failure("renaming " + temp.string() + " to " + target.string(), error);
    return;
  }
  // An existing directory keeps its other contents; each complete file replaces its old version.
  for (const auto& entry : fs::directory_iterator(temp)) {
    fs::rename(entry.path(), target / entry.path().filename(), error);
    if (error) throw_fs_failure("moving " + entry.path().string() + " into " + target.string(), error);
  }
  fs::remove(temp, error);
}

}  // namespace trlhpc
