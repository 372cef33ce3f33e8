#include "trlhpc/train/checkpoint/commit.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc::checkpoint {
namespace fs = std::filesystem;
namespace {

// Data (a file) or entries (a folder) of `path` on stable storage.
void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw RuntimeFailure(rank_prefix() + "cannot open " + path.string() + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) throw RuntimeFailure(rank_prefix() + "fsync of " + path.string() + " failed: " + std::strerror(error));
}

void write_synced(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw RuntimeFailure(rank_prefix() + "cannot write " + path.string());
  }
  fsync_path(path);
}

void copy_tokenizer_files(const std::string& tokenizer_dir, const fs::path& into) {
  if (tokenizer_dir.empty()) return;
  for (const std::string& name : hf_tokenizer_file_names()) {
    const fs::path from = fs::path(tokenizer_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec)) continue;
    fs::copy_file(from, into / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw RuntimeFailure(rank_prefix() + "cannot copy " + from.string() + ": " + ec.message());
    fsync_path(into / name);
  }
}

// checkpoint-STEP.tmp -> checkpoint-STEP; an existing committed folder of the same step (a run that
// resumed before it) is moved aside first and deleted after.
void rename_into_place(const fs::path& tmp, const fs::path& final_dir) {
  std::error_code ec;
  const fs::path old = final_dir.string() + ".old";
  if (fs::exists(final_dir)) {
    fs::remove_all(old, ec);
    fs::rename(final_dir, old, ec);
    if (ec) throw RuntimeFailure(rank_prefix() + "cannot move " + final_dir.string() + " aside: " + ec.message());
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw RuntimeFailure(rank_prefix() + "cannot rename " + tmp.string() + " to " + final_dir.string() + ": " + ec.message());
  fs::remove_all(old, ec);
}

void point_latest_at(const fs::path& output_dir, const fs::path& final_dir) {
  const fs::path tmp = output_dir / (std::string(kLatestFile) + ".tmp");
  write_synced(tmp, final_dir.filename().string() + "\n");
  std::error_code ec;
  fs::rename(tmp, output_dir / kLatestFile, ec);
  if (ec) throw RuntimeFailure(rank_prefix() + "cannot update " + (output_dir / kLatestFile).string() + ": " + ec.message());
  fsync_path(output_dir);
}

// The manifest goes first: a deletion cut short leaves a folder that is no longer a checkpoint.
void remove_checkpoint(const std::string& dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kManifestFile, ec);
  fs::remove_all(dir, ec);
}

void prune(const std::string& output_dir, int64_t keep, int64_t newest_step, int64_t keep_step) {
  if (keep <= 0) return;
  auto all = committed_checkpoints(output_dir);
  int64_t excess = static_cast<int64_t>(all.size()) - keep;
  for (const auto& [step, dir] : all) {
    if (excess <= 0) break;
    if (step == newest_step || step == keep_step) continue;  // protected: more than `keep` may then remain
    remove_checkpoint(dir);
    --excess;
  }
}

}  // namespace

std::string begin_save(const std::string& output_dir, int64_t step) {
  const fs::path tmp = checkpoint_dir(output_dir, step) + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);  // left by a save that died
  fs::create_directories(tmp, ec);
  if (ec) throw UserError("cannot create the checkpoint folder " + tmp.string() + ": " + ec.message() +
                          "; check that --output_dir is writable");
  return tmp.string();
}

std::string commit_save(const std::string& output_dir, int64_t step, const nlohmann::json& manifest,
                        const std::string& tokenizer_dir, int64_t save_total_limit, int64_t keep_step) {
  const fs::path final_dir = checkpoint_dir(output_dir, step);
  const fs::path tmp = final_dir.string() + ".tmp";
  fsync_path(tmp / kStateFile);
  copy_tokenizer_files(tokenizer_dir, tmp);
  write_synced(tmp / kManifestFile, manifest.dump(1) + "\n");
  fsync_path(tmp);
  rename_into_place(tmp, final_dir);
  fsync_path(output_dir);
  point_latest_at(output_dir, final_dir);
  prune(output_dir, save_total_limit, step, keep_step);
  return final_dir.string();
}

std::vector<std::string> keep_only_checkpoint(const std::string& output_dir, int64_t keep_step) {
  const auto all = committed_checkpoints(output_dir);
  std::vector<std::string> deleted;
  if (std::none_of(all.begin(), all.end(), [&](const auto& c) { return c.first == keep_step; })) return deleted;
  point_latest_at(output_dir, checkpoint_dir(output_dir, keep_step));
  for (const auto& [step, dir] : all) {
    if (step == keep_step) continue;
    remove_checkpoint(dir);
    deleted.push_back(dir);
  }
  return deleted;
}

}  // namespace trlhpc::checkpoint
