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

namespace {

// checkpoint-N.tmp: a save that never committed (the job died while writing it). It is no checkpoint:
// --resume_from_checkpoint latest cannot use it and auto starts afresh, so it must not make that fresh
// start refuse the folder (the requeue of a job killed in its first save would fail with exit 1).
bool unfinished_save(const std::string& name) {
  const std::string suffix = ".tmp";
  return name.rfind("checkpoint-", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> prepare_fresh_output_dir(const std::string& output_dir, bool overwrite) {
  std::vector<std::string> files = earlier_run_files(output_dir);
  const fs::path dir(output_dir);
  std::error_code ec;
  std::vector<std::string> log;
  std::string unfinished;
  for (const std::string& name : files) {
    if (!unfinished_save(name)) continue;
    fs::remove_all(dir / name, ec);
    if (ec) throw RuntimeFailure(rank_prefix() + "cannot remove " + (dir / name).string() + ": " + ec.message());
    unfinished += (unfinished.empty() ? "" : ", ") + name;
  }
  std::erase_if(files, unfinished_save);
  if (!unfinished.empty())
    log.push_back("removed " + unfinished + " from " + output_dir + ": a checkpoint save that did not finish");
  std::vector<std::string> checkpoints;
  for (const std::string& name : files)
    if (name.rfind("checkpoint-", 0) == 0 || name == checkpoint::kLatestFile) checkpoints.push_back(name);
  if (!checkpoints.empty() && !overwrite) {
    std::string listed;
    for (size_t i = 0; i < checkpoints.size() && i < 6; ++i) listed += (i ? ", " : "") + checkpoints[i];
    if (checkpoints.size() > 6) listed += ", ... (" + std::to_string(checkpoints.size()) + " in all)";
    throw UserError("--output_dir " + output_dir + " holds checkpoints of an earlier run (" + listed +
                    "): resume it with --resume_from_checkpoint latest, choose another --output_dir, or pass "
                    "--overwrite_output_dir to remove them (and its metrics.jsonl and model) and start afresh");
  }
  if (overwrite && !files.empty()) {
    std::string names;
    for (const std::string& name : files) {
      fs::remove_all(dir / name, ec);
      if (ec)
        throw RuntimeFailure(rank_prefix() + "--overwrite_output_dir: cannot remove " + (dir / name).string() + ": " +
                             ec.message());
      names += (names.empty() ? "" : ", ") + name;
    }
    log.push_back("--overwrite_output_dir: removed the earlier run's " + names + " from " + output_dir);
  } else if (fs::exists(dir / "metrics.jsonl")) {
    fs::rename(dir / "metrics.jsonl", dir / "metrics.jsonl.old", ec);
    if (ec) throw RuntimeFailure(rank_prefix() + "cannot move " + (dir / "metrics.jsonl").string() + " aside: " + ec.message());
    log.push_back("the earlier run's metrics.jsonl in " + output_dir + " is kept as metrics.jsonl.old; this run writes a new one");
  }
  return log;
}

}  // namespace trlhpc
