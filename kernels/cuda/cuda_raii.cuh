#pragma once
// Move-only owners of CUDA runtime objects (CONVENTIONS.md habit 5): a stream, an event, a device
// guard. Destructors never throw (a failing destroy at process teardown, when the driver may already
// be gone, is ignored); constructors throw RuntimeFailure through TRLHPC_CHECK_CUDA.
#include <cuda_runtime.h>

#include <utility>

#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

class CudaStream {
 public:
  CudaStream() { TRLHPC_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const { TRLHPC_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  // timing = false makes a cheaper event usable only for ordering.
  explicit CudaEvent(bool timing = false) {
    TRLHPC_CHECK_CUDA(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const { TRLHPC_CHECK_CUDA(cudaEventRecord(event_, stream)); }
  // Milliseconds from `start` to this event (both recorded, this one complete).
  float elapsed_ms_since(const CudaEvent& start) const {
    float ms = 0;
    TRLHPC_CHECK_CUDA(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// Makes `device` current for a scope and restores the previous device after it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TRLHPC_CHECK_CUDA(cudaGetDevice(&previous_));
    changed_ = previous_ != device;
    if (changed_) TRLHPC_CHECK_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace trlhpc::cuda
