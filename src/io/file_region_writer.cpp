#include "trlhpc/io/file_region_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

FileRegionWriter::FileRegionWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) throw RuntimeFailure("cannot open " + path_ + " for writing: " + std::strerror(errno));
}

FileRegionWriter::~FileRegionWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileRegionWriter::write(int64_t offset, const void* bytes, size_t size) {
  TRLHPC_ASSERT(fd_ >= 0, "write to " + path_ + " after finish()");
  TRLHPC_ASSERT(offset >= 0, "negative offset into " + path_);
  if (size == 0) return;
  const auto* data = static_cast<const std::byte*>(bytes);
  if (pending_size_ > 0 && offset == pending_offset_ + static_cast<int64_t>(pending_size_) &&
      data == pending_bytes_ + pending_size_) {
    pending_size_ += size;  // continues the held-back run in the file and in memory: one pwrite
    return;
  }
  flush();
  pending_offset_ = offset;
  pending_bytes_ = data;
  pending_size_ = size;
}

void FileRegionWriter::flush() {
  size_t done = 0;
  while (done < pending_size_) {
    const ssize_t n = ::pwrite(fd_, pending_bytes_ + done, pending_size_ - done,
                               static_cast<off_t>(pending_offset_ + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)  // 0 bytes written for a non-empty request: the file system takes no more (treated as full)
      throw RuntimeFailure("write of " + std::to_string(pending_size_ - done) + " bytes at offset " +
                           std::to_string(pending_offset_ + static_cast<int64_t>(done)) + " of " + path_ +
                           " failed: " + std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
  pending_size_ = 0;
  pending_bytes_ = nullptr;
}

void FileRegionWriter::finish() {
  if (fd_ < 0) return;
  flush();
  // fsync before close: on a parallel or network file system this is what makes the bytes this node
  // wrote reach the servers (and the other nodes) before the ranks agree the file is complete.
  if (::fsync(fd_) != 0) {
    const int error = errno;
    throw RuntimeFailure("fsync of " + path_ + " failed: " + std::strerror(error));
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw RuntimeFailure("close of " + path_ + " failed: " + std::strerror(errno));
}

}  // namespace trlhpc
