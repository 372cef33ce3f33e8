#pragma once
// StreamUseRecorder: how a device communicator tells the backend's caching allocator that work on its
// own stream uses a device buffer, so that the buffer's block is not handed out again before that work
// completes even if the host releases it first (stream-ordered release, device_allocator.cuh). The CUDA
// backend supplies it (CudaOps::stream_use_recorder); null means nothing to tell (host memory).
// C++17: nccl_context.hpp, which nvcc compiles, uses it.
#include <functional>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace trlhpc {

// (a device address inside a buffer the work uses, the stream the work is queued on)
using StreamUseRecorder = std::function<void(const void* device_ptr, CUstream_st* stream)>;

}  // namespace trlhpc
