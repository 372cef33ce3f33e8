#pragma once
// MappedFile: a whole file mapped read-only into memory (mmap), unmapped by the destructor.
//
// Pages are read lazily by the OS, so mapping a 15 GB safetensors shard costs nothing until a rank
// touches the slice it needs. Move-only.
#include <cstddef>
#include <string>

namespace trlhpc {

class MappedFile {
 public:
  // Maps `path`. A file that cannot be opened -> UserError naming it; an mmap failure -> RuntimeFailure.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }  // nullptr for an empty file
  // Unmaps the pages holding bytes [offset, offset + length) from this process (madvise DONTNEED; the
  // whole pages around them): they stop counting in its resident memory, stay in the page cache, and a
  // later read maps them again. For a reader that touches each byte once.
  void drop_resident(size_t offset, size_t length) const;
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trlhpc
