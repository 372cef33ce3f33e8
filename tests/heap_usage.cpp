// The malloc family over glibc's __libc_* functions, counting live bytes (heap_usage.hpp).
#include "heap_usage.hpp"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* pointer, size_t size);
void __libc_free(void* pointer);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
}

namespace {

// Constant-initialised: valid before any constructor runs (the loader and libraries allocate early).
std::atomic<int64_t> in_use{0};
std::atomic<int64_t> peak{0};

void count_allocated(void* pointer) {
  if (!pointer) return;
  const int64_t now = in_use.fetch_add(static_cast<int64_t>(malloc_usable_size(pointer))) +
                      static_cast<int64_t>(malloc_usable_size(pointer));
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

void count_freed(void* pointer) {
  if (pointer) in_use.fetch_sub(static_cast<int64_t>(malloc_usable_size(pointer)));
}

void* counted(void* pointer) {
  count_allocated(pointer);
  return pointer;
}

}  // namespace

extern "C" {

void* malloc(size_t size) { return counted(__libc_malloc(size)); }
void* calloc(size_t count, size_t size) { return counted(__libc_calloc(count, size)); }
void* memalign(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size)); }
void* aligned_alloc(size_t alignment, size_t size) { return counted(__libc_memalign(alignment, size)); }
void* valloc(size_t size) { return counted(__libc_valloc(size)); }
void* pvalloc(size_t size) { return counted(__libc_pvalloc(size)); }

void free(void* pointer) {
  count_freed(pointer);
  __libc_free(pointer);
}

void* realloc(void* pointer, size_t size) {
  const int64_t before = pointer ? static_cast<int64_t>(malloc_usable_size(pointer)) : 0;
  void* moved = __libc_realloc(pointer, size);
  if (moved || size == 0) in_use.fetch_sub(before);  // the old block is gone (moved, or freed by size 0)
  return counted(moved);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* pointer = __libc_memalign(alignment, size);
  if (!pointer && size != 0) return ENOMEM;
  *out = counted(pointer);
  return 0;
}

}  // extern "C"

namespace trlhpc::testing {

int64_t heap_bytes_in_use() { return in_use.load(); }
int64_t heap_peak_bytes() { return peak.load(); }
void reset_heap_peak() { peak.store(in_use.load()); }

}  // namespace trlhpc::testing
