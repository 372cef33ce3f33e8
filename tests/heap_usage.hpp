#pragma once
// Heap bytes of this process, counted at the allocator: heap_usage.cpp defines the malloc family
// (malloc, calloc, realloc, free, aligned_alloc, posix_memalign, memalign, valloc, pvalloc) over glibc's
// own __libc_* entry points and adds malloc_usable_size of every live block. It sees every allocation
// of the process (std::vector, Ops' host tensors, MPI, OpenBLAS's malloc'd buffers), not resident pages,
// so a peak over a region of code is exact and independent of the machine's load. Link heap_usage.cpp
// into one test executable only (it replaces the allocator's entry points of that process).
#include <cstdint>

namespace trlhpc::testing {

int64_t heap_bytes_in_use();
// The largest heap_bytes_in_use() since the last reset_heap_peak() (or the start).
int64_t heap_peak_bytes();
void reset_heap_peak();  // peak = bytes in use now

}  // namespace trlhpc::testing
