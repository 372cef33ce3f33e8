#include "trlhpc/train/output_dir.hpp"

#include <algorithm>
#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc {
namespace fs = std::filesystem;

std::vector<std::string> earlier_run_files(const std::string& output_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(output_dir, ec)) {
    const std::string name = entry.path().filename().string();
    // checkpoint-N, and the checkpoint-N.tmp / .old of a save that was interrupted: a fresh run would
    // reuse those names for its own steps.
    const bool checkpoint = name.rfind("checkpoint-", 0) == 0;
    if (checkpoint || name == checkpoint::kLatestFile || name == "metrics.jsonl" || name == "model.safetensors")
      found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void require_fresh_output_dir(const std::string& output_dir, const std::vector<std::string>& files, bool overwrite) {
  if (files.empty() || overwrite) return;
  std::string listed;
  for (size_t i = 0; i < files.size() && i < 6; ++i) listed += (i ? ", " : "") + files[i];
  if (files.size() > 6) listed += ", ... (" + std::to_string(files.size()) + " in all)";
  throw UserError("--output_dir " + output_dir + " holds an earlier run (" + listed +
                  "): resume it with --resume_from_checkpoint latest, choose another --output_dir, or pass "
                  "--overwrite_output_dir to remove those files and start afresh");
}

void remove_earlier_run(const std::string& output_dir, const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    std::error_code ec;
    fs::remove_all(fs::path(output_dir) / name, ec);
    if (ec)
      throw RuntimeFailure(rank_prefix() + "--overwrite_output_dir: cannot remove " +
                           (fs::path(output_dir) / name).string() + ": " + ec.message());
  }
}

}  // namespace trlhpc
