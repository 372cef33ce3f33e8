#include "trlhpc/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(path + ": cannot open (" + std::strerror(errno) + "); check the path and permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int saved = errno;
    ::close(fd);
    throw UserError(path + ": not a regular file" + (saved ? std::string(" (") + std::strerror(saved) + ")" : ""));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* address = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int saved = errno;
    ::close(fd);  // the mapping keeps the file referenced
    if (address == MAP_FAILED)
      throw RuntimeFailure(rank_prefix() + "mmap of " + path + " (" + std::to_string(size_) +
                           " bytes) failed: " + std::strerror(saved));
    data_ = static_cast<const std::byte*>(address);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() { release(); }

void MappedFile::drop_resident(size_t offset, size_t length) const {
  if (!data_ || length == 0) return;
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  const size_t end = std::min(size_, (offset + length + page - 1) / page * page);
  // Advice only: a failure leaves the pages mapped, which costs memory, not correctness.
  ::madvise(const_cast<std::byte*>(data_) + begin, end - begin, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace trlhpc
