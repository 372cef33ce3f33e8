#pragma once
// PinnedStaging: the CUDA half of StagedMpiCommunicator (staged_mpi_communicator.hpp), defined in
// src/comm/pinned_staging.cu. CUDA builds only; C++17 and free of CUDA headers, like nccl_context.hpp.
//
// Page-locked host buffers (cudaMallocHost) kept in a pool and reused: an operation leases one buffer
// per direction and returns it when it completes, so buffers are allocated only while the largest
// message or the number of operations in flight grows. Copies run on the CUDA backend's compute stream
// and synchronise it, because MPI reads and writes host memory with no stream in sight:
//   download: device -> pinned, after every compute kernel queued so far; returns once the bytes are there;
//   upload:   pinned -> device, queued on the compute stream; returns once copied, so the buffer may go
//             back to the pool and later kernels see the data.
#include <cstddef>
#include <memory>
#include <vector>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace trlhpc {

class PinnedPool;

// One pooled page-locked buffer, returned to its pool on destruction. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(std::shared_ptr<PinnedPool> pool, void* data, size_t capacity)
      : pool_(std::move(pool)), data_(data), capacity_(capacity) {}
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  std::shared_ptr<PinnedPool> pool_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

class PinnedStaging {
 public:
  // `device`: the GPU the buffers are copied from/to; `compute_stream`: the CUDA backend's stream
  // (null = the legacy default stream).
  PinnedStaging(int device, CUstream_st* compute_stream);
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // A pinned buffer of at least `bytes` (at least 1), reused from the pool when one fits.
  PinnedBuffer acquire(size_t bytes);
  void download(void* host, const void* device, size_t bytes);
  void upload(void* device, const void* host, size_t bytes);
  // Bytes of pinned memory allocated so far (the pool's total), for tests of reuse.
  size_t pinned_bytes() const;

 private:
  int device_;
  CUstream_st* compute_stream_;
  std::shared_ptr<PinnedPool> pool_;
};

}  // namespace trlhpc
