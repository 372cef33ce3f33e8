#pragma once
// TRLHPC_CHECK_CUBLAS: the cuBLAS / cuBLASLt member of the check-macro family of
// include/trlhpc/core/cuda_check.hpp. A failing call throws RuntimeFailure with the expression, the
// status name from cuBLASLt, file:line, rank and host.
#include <cublasLt.h>

#include <string>

#include "trlhpc/core/cuda_check.hpp"

#define TRLHPC_CHECK_CUBLAS(expr)                                                                   \
  do {                                                                                              \
    cublasStatus_t trlhpc_cublas_rc_ = (expr);                                                      \
    if (trlhpc_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::trlhpc::throw_runtime_failure("cuBLAS", #expr, cublasLtGetStatusString(trlhpc_cublas_rc_),  \
                                      __FILE__, __LINE__);                                          \
  } while (0)
