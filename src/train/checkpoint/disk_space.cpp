#include "trlhpc/train/checkpoint/disk_space.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kMetadataBytesPerDataset = 4096;
constexpr int64_t kMetadataBytesFixed = 1 << 20;

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Bytes an unprivileged writer may still take on the file system of `dir`; -1 when unknown.
int64_t free_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return -1;
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

int64_t folder_bytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  return total;
}

std::string latest_name(const std::string& output_dir) {
  std::ifstream in(fs::path(output_dir) / kLatestFile);
  std::string name;
  if (!(in >> name)) return "none yet";
  return name;
}

std::string disk_full_message(const std::string& output_dir, int64_t step, int64_t bytes, int64_t available,
                              const std::string& cause) {
  return "disk full: the checkpoint of step " + std::to_string(step) + " needs about " + mib(bytes) +
         " on the file system of --output_dir " + output_dir + ", which has " +
         (available >= 0 ? mib(available) : std::string("an unknown amount")) + " free" +
         (cause.empty() ? "" : " (" + cause + ")") + "; the partial checkpoint-" + std::to_string(step) +
         ".tmp is removed and the earlier checkpoints are untouched (latest: " + latest_name(output_dir) +
         "). Free space (or keep fewer checkpoints with --save_total_limit) and resume with "
         "--resume_from_checkpoint latest";
}

}  // namespace

int64_t checkpoint_bytes_estimate(int64_t data_bytes, int64_t num_datasets, int64_t manifest_bytes,
                                  const std::string& tokenizer_dir) {
  int64_t tokenizer_bytes = 0;
  if (!tokenizer_dir.empty())
    for (const std::string& name : hf_tokenizer_file_names()) {
      std::error_code ec;
      const uintmax_t size = fs::file_size(fs::path(tokenizer_dir) / name, ec);
      if (!ec) tokenizer_bytes += static_cast<int64_t>(size);
    }
  return data_bytes + num_datasets * kMetadataBytesPerDataset + kMetadataBytesFixed + 2 * manifest_bytes +
         tokenizer_bytes;
}

void reserve_space(const std::string& tmp_dir, const std::string& output_dir, int64_t step, int64_t bytes) {
  const std::string path = (fs::path(tmp_dir) / kSpaceReservationFile).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOSPC || error == EDQUOT)
      throw RuntimeFailure(disk_full_message(output_dir, step, bytes, free_bytes(output_dir), std::strerror(error)));
    throw RuntimeFailure("cannot create " + path + ": " + std::strerror(error) + "; check that --output_dir " +
                         output_dir + " is writable");
  }
  // fallocate(2), not posix_fallocate: glibc's fallback for file systems without it writes every block,
  // which would write each checkpoint twice.
  const int rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  const int error = rc == 0 ? 0 : errno;
  ::close(fd);
  if (error == 0) return;
  std::error_code ec;
  fs::remove(path, ec);
  if (error == ENOSPC || error == EDQUOT)
    throw RuntimeFailure(disk_full_message(output_dir, step, bytes, free_bytes(output_dir), std::strerror(error)));
  if (error != EOPNOTSUPP && error != ENOSYS)
    throw RuntimeFailure("cannot reserve " + mib(bytes) + " for the checkpoint of step " + std::to_string(step) +
                         " in " + path + ": " + std::strerror(error));
  const int64_t available = free_bytes(output_dir);  // no fallocate here: the free space decides
  if (available >= 0 && available < bytes)
    throw RuntimeFailure(disk_full_message(output_dir, step, bytes, available, "statvfs"));
}

void release_space(const std::string& tmp_dir) {
  std::error_code ec;
  fs::remove(fs::path(tmp_dir) / kSpaceReservationFile, ec);
}

std::string disk_full_verdict(const std::string& tmp_dir, const std::string& output_dir, int64_t step, int64_t bytes) {
  const int64_t available = free_bytes(output_dir);
  if (available < 0 || available + folder_bytes(tmp_dir) >= bytes) return "";
  return disk_full_message(output_dir, step, bytes, available, "a write failed with the disk full");
}

}  // namespace trlhpc::checkpoint
