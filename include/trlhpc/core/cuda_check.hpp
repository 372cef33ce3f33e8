#pragma once
// Check macros for the CUDA runtime and NCCL, in the style of error.hpp's TRLHPC_CHECK_MPI: a failing
// call throws RuntimeFailure naming the library, the expression, the library's own error string,
// file:line, and (through rank_prefix) the rank and host.
//
// Usable from .cu files, which nvcc compiles as C++17 (cmake/cuda.cmake), and from C++20 host files
// of a CUDA build. Include only in code that is compiled when TRLHPC_HAVE_CUDA is defined.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "trlhpc/core/error.hpp"

#define TRLHPC_CHECK_CUDA(expr)                                                                     \
  do {                                                                                              \
    cudaError_t trlhpc_cuda_rc_ = (expr);                                                           \
    if (trlhpc_cuda_rc_ != cudaSuccess)                                                             \
      ::trlhpc::throw_runtime_failure("CUDA", #expr,                                                \
                                      std::string(cudaGetErrorName(trlhpc_cuda_rc_)) + ": " +       \
                                          cudaGetErrorString(trlhpc_cuda_rc_),                      \
                                      __FILE__, __LINE__);                                          \
  } while (0)

// ncclGetLastError adds the detail NCCL logged for the failing call (which peer, which transport).
#define TRLHPC_CHECK_NCCL(expr)                                                                     \
  do {                                                                                              \
    ncclResult_t trlhpc_nccl_rc_ = (expr);                                                          \
    if (trlhpc_nccl_rc_ != ncclSuccess)                                                             \
      ::trlhpc::throw_runtime_failure("NCCL", #expr,                                                \
                                      std::string(ncclGetErrorString(trlhpc_nccl_rc_)) + " (" +     \
                                          ncclGetLastError(nullptr) + ")",                          \
                                      __FILE__, __LINE__);                                          \
  } while (0)

// After a kernel launch: a bad configuration (grid, shared memory, missing sm_XX image) is reported by
// cudaGetLastError without waiting for the kernel; `what` names the kernel in the message.
#define TRLHPC_CHECK_CUDA_LAUNCH(what)                                                              \
  do {                                                                                              \
    cudaError_t trlhpc_cuda_rc_ = cudaGetLastError();                                              \
    if (trlhpc_cuda_rc_ != cudaSuccess)                                                             \
      ::trlhpc::throw_runtime_failure("CUDA", "launch of " what,                                    \
                                      std::string(cudaGetErrorName(trlhpc_cuda_rc_)) + ": " +       \
                                          cudaGetErrorString(trlhpc_cuda_rc_),                      \
                                      __FILE__, __LINE__);                                          \
  } while (0)
