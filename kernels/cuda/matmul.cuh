#pragma once
// Dense matmul on cuBLASLt and the bias ops (CUDA backend; CPU: kernels/cpu/matmul.cpp).
//
// matmul:   c (M, N) = alpha * op(a) @ op(b) + beta * c, row-major, op(x) = x or x^T.
//           a is (M, K), or (K, M) when trans_a; b is (K, N), or (N, K) when trans_b. Every linear
//           layer uses it three times: y = x W^T, dx = dy W, dW += dy^T x (beta = 1: parameter grads
//           accumulate). beta = 0 never reads c (NaN in c is harmless), as BLAS specifies.
//           a and b share one dtype (fp32 or bf16); c is fp32 or bf16; accumulation is always fp32
//           (CUBLAS_COMPUTE_32F, or its TF32 tensor-core variant for fp32 inputs when allowed).
//           Row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, so cuBLAS's
//           "A" is our b and its "B" is our a, with no copies.
//           a, b fp32 with c bf16 is refused up front (no cuBLAS path exists; docs/CUDA-REVIEW-FIXES.md defect 4).
//           Plans (operation descriptor, layouts and the algorithm) are cached per shape, transposes,
//           dtypes and operand alignment in an LRU of 256; the heuristic's algorithm is shared by the row
//           counts of one bucket (trlhpc/kernels/matmul_plan_cache.hpp, defect 7) once
//           cublasLtMatmulAlgoCheck accepts it for the exact shape. One workspace serves every call.
//           Shapes for which the heuristic offers no algorithm (bf16 with odd leading dimensions) go to
//           cublasGemmEx.
// bias_add: y (N, C) += bias (C) on every row.        Gradient: dbias = column sums of dy.
// bias_bwd: dbias (C) += sum_n dy (N, C), deterministic (column_reduce.cuh).
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>
#include <memory>

#include "device_allocator.cuh"

namespace trlhpc::cuda {

class Matmul {
 public:
  Matmul(DeviceAllocator& allocator, int64_t workspace_bytes, bool allow_tf32);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // ab_type, c_type: CUDA_R_32F or CUDA_R_16BF.
  void run(const void* a, bool trans_a, const void* b, bool trans_b, void* c, cudaDataType_t ab_type,
           cudaDataType_t c_type, int64_t M, int64_t N, int64_t K, float alpha, float beta, cudaStream_t stream);

  int64_t cached_plans() const;     // <= 256
  int64_t heuristic_calls() const;  // cublasLtMatmulAlgoGetHeuristic calls so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// y (N, C) += bias (C). T in {float, bf16}.
template <class T>
void bias_add(T* y, const float* bias, int64_t N, int64_t C, cudaStream_t stream);
// dbias (C) += sum over rows of dy (N, C).
template <class T>
void bias_bwd(const T* dy, float* dbias, int64_t N, int64_t C, DeviceAllocator& allocator, cudaStream_t stream);

}  // namespace trlhpc::cuda
