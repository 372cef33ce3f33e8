#pragma once
// FileRegionWriter: writes byte runs at given offsets of a file that already exists and that other
// processes (other ranks, on other nodes) write into at the same time, each its own regions. Plain POSIX
// (open without O_CREAT or O_TRUNC, pwrite, fsync, close): the file's layout belongs to whoever created
// it (checkpoint state.h5: rank 0, with serial HDF5); this only fills regions of it.
//
// On a parallel file system (Lustre, GPFS, BeeGFS) many clients pwrite()ing disjoint regions of one
// file is the ordinary N-to-1 pattern; their writes are visible to the other nodes once each has
// fsync()ed or closed (NFS: close-to-open consistency), which finish() does before returning.
//
// Runs given one after another that continue each other both in the file and in memory are joined into
// one pwrite (a ZeRO shard of a unit is one call); a run is written whole (short writes and EINTR are
// retried). Every failure throws RuntimeFailure naming the file, the offset and the OS's reason; the
// caller decides how ranks agree on it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace trlhpc {

class FileRegionWriter {
 public:
  // Opens `path` for writing. RuntimeFailure naming it when it cannot (missing, not writable).
  explicit FileRegionWriter(std::string path);
  ~FileRegionWriter();  // closes without syncing (an abandoned write)
  FileRegionWriter(const FileRegionWriter&) = delete;
  FileRegionWriter& operator=(const FileRegionWriter&) = delete;

  // `size` bytes from `bytes` at byte `offset` of the file (held back to join the next run when it
  // continues this one; `bytes` must stay valid until the next write, flush or finish).
  void write(int64_t offset, const void* bytes, size_t size);
  // Writes what is held back (before the memory it points into goes away).
  void flush();
  // Writes what is held back, fsyncs and closes. RuntimeFailure on any error.
  void finish();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t pending_offset_ = 0;
  const std::byte* pending_bytes_ = nullptr;
  size_t pending_size_ = 0;
};

}  // namespace trlhpc
