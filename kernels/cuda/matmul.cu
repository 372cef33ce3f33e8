// cuBLASLt matmul with cached plans, and bias add/backward (see matmul.cuh).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "column_reduce.cuh"
#include "cublas_check.cuh"
#include "device_math.cuh"
#include "elementwise.cuh"
#include "matmul.cuh"
#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/matmul_plan_cache.hpp"

namespace trlhpc::cuda {

namespace {

// Largest power of two (<= 16) dividing the address: cuBLASLt kernels need aligned operands, and the
// heuristic must be told the real alignment (parameter views in flat unit buffers start anywhere).
int alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && address % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
};
using DescPtr = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using LayoutPtr = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;

// Layout of a stored column-major matrix rows x cols with leading dimension ld.
LayoutPtr make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  TRLHPC_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                 static_cast<uint64_t>(cols), ld));
  return LayoutPtr(layout);
}

struct Plan {
  DescPtr op;
  LayoutPtr a, b, c;  // cuBLAS's A (our b), B (our a), C/D
  cublasLtMatmulAlgo_t algo;
  bool gemm_ex = false;  // the heuristic found nothing (odd bf16 leading dimensions): classic cublasGemmEx
};

// trans_a, trans_b, M, N, K, ab_type, c_type, alignment a, b, c
using PlanKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int, int, int, int, int>;

// Plans kept for exact shapes (matmul_plan_cache.hpp): a training step uses a few dozen; variable
// packing adds one per new row count, which the bound keeps in check.
constexpr size_t kMaxPlans = 256;

// The heuristic's choice for a row-count bucket (PlanKey with M replaced by matmul_rows_bucket(M)).
struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
};

template <class T>
__global__ void bias_add_kernel(T* __restrict__ y, const float* __restrict__ bias, int64_t N, int64_t C) {
  const int64_t n = N * C;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) + bias[i % C]);
}

template <class T>
struct BiasTerm {
  const T* dy;
  int64_t C;
  __device__ float operator()(int64_t r, int64_t c) const { return to_float(dy[r * C + c]); }
};

}  // namespace

struct Matmul::Impl {
  DeviceAllocator& allocator;
  bool allow_tf32;
  cublasLtHandle_t handle = nullptr;
  cublasHandle_t fallback = nullptr;  // created on first use
  DeviceBuffer<unsigned char> workspace;
  kernels::BoundedLru<PlanKey, Plan> plans{kMaxPlans};
  std::map<PlanKey, AlgoChoice> algos;  // by row bucket: a few per (shape, dtype) class
  int64_t heuristic_calls = 0;

  Impl(DeviceAllocator& a, int64_t workspace_bytes, bool tf32) : allocator(a), allow_tf32(tf32) {
    TRLHPC_CHECK_CUBLAS(cublasLtCreate(&handle));
    workspace = DeviceBuffer<unsigned char>(allocator, workspace_bytes);
  }
  ~Impl() {
    plans.clear();
    if (fallback) cublasDestroy(fallback);
    if (handle) cublasLtDestroy(handle);
  }

  Plan& plan(const PlanKey& key, const void* a, bool trans_a, const void* b, bool trans_b, const void* c,
             cudaDataType_t ab_type, cudaDataType_t c_type, int64_t M, int64_t N, int64_t K) {
    if (Plan* hit = plans.find(key)) return *hit;
    Plan p;
    const cublasComputeType_t compute =
        ab_type == CUDA_R_32F && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasLtMatmulDesc_t op = nullptr;
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
    p.op = DescPtr(op);
    // Column-major C^T (N x M) = opA'(b) (N x K) * opB'(a) (K x M), see matmul.cuh.
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's A is our b
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's B is our a
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
    // Stored matrices: b row-major (K, N) is column-major (N x K, ld N); transposed (N, K) is (K x N, ld K).
    p.a = trans_b ? make_layout(ab_type, K, N, K) : make_layout(ab_type, N, K, N);
    // a row-major (M, K) is column-major (K x M, ld K); transposed (K, M) is (M x K, ld M).
    p.b = trans_a ? make_layout(ab_type, M, K, M) : make_layout(ab_type, K, M, K);
    p.c = make_layout(c_type, N, M, N);

    cublasLtMatmulPreference_t pref = nullptr;
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, void (*)(cublasLtMatmulPreference_t)> pref_owner(
        pref, [](cublasLtMatmulPreference_t q) { cublasLtMatmulPreferenceDestroy(q); });
    const uint64_t ws = static_cast<uint64_t>(workspace.size());
    const uint32_t align_a = static_cast<uint32_t>(alignment_of(b)), align_b = static_cast<uint32_t>(alignment_of(a));
    const uint32_t align_c = static_cast<uint32_t>(alignment_of(c));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                             sizeof(align_a)));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                             sizeof(align_b)));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                             sizeof(align_c)));
    TRLHPC_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                             sizeof(align_c)));
    // The algorithm of this row bucket, if cuBLASLt accepts it for the exact problem within the workspace.
    PlanKey bucket_key = key;
    std::get<2>(bucket_key) = kernels::matmul_rows_bucket(M);
    if (auto known = algos.find(bucket_key); known != algos.end()) {
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(handle, p.op.get(), p.a.get(), p.b.get(), p.c.get(), p.c.get(), &known->second.algo,
                                  &check) == CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= ws) {
        p.algo = known->second.algo;
        return plans.insert(key, std::move(p));
      }
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    ++heuristic_calls;
    const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle, p.op.get(), p.a.get(), p.b.get(),
                                                                     p.c.get(), p.c.get(), pref, 1, &result, &found);
    if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;  // "no algorithm": the fallback below
    else TRLHPC_CHECK_CUBLAS(heuristic);
    p.gemm_ex = found == 0;
    if (found > 0) {
      p.algo = result.algo;
      algos.emplace(bucket_key, AlgoChoice{result.algo});  // the bucket's first found algorithm stays
    }
    return plans.insert(key, std::move(p));
  }
};

Matmul::Matmul(DeviceAllocator& allocator, int64_t workspace_bytes, bool allow_tf32)
    : impl_(std::make_unique<Impl>(allocator, workspace_bytes, allow_tf32)) {}

Matmul::~Matmul() = default;

int64_t Matmul::cached_plans() const { return static_cast<int64_t>(impl_->plans.size()); }
int64_t Matmul::heuristic_calls() const { return impl_->heuristic_calls; }

void Matmul::run(const void* a, bool trans_a, const void* b, bool trans_b, void* c, cudaDataType_t ab_type,
                 cudaDataType_t c_type, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                 cudaStream_t stream) {
  // Neither cuBLASLt nor cublasGemmEx multiplies fp32 operands into a bf16 output (docs/CUDA-REVIEW-FIXES.md defect 4).
  TRLHPC_ASSERT(!(ab_type == CUDA_R_32F && c_type == CUDA_R_16BF),
                "matmul: fp32 operands with a bf16 output are not supported; use an fp32 output or bf16 operands");
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    // Nothing to multiply: c = beta * c, with beta = 0 meaning "overwrite" even when c holds NaN.
    const size_t element = c_type == CUDA_R_32F ? 4 : 2;
    if (beta == 0.0f) {
      TRLHPC_CHECK_CUDA(cudaMemsetAsync(c, 0, static_cast<size_t>(M * N) * element, stream));
    } else if (beta != 1.0f) {
      if (c_type == CUDA_R_32F)
        scale_inplace(static_cast<float*>(c), beta, M * N, stream);
      else
        scale_inplace(static_cast<bf16*>(c), beta, M * N, stream);
    }
    return;
  }
  const PlanKey key{trans_a, trans_b, M, N, K, static_cast<int>(ab_type), static_cast<int>(c_type),
                    alignment_of(a), alignment_of(b), alignment_of(c)};
  Plan& p = impl_->plan(key, a, trans_a, b, trans_b, c, ab_type, c_type, M, N, K);
  if (p.gemm_ex) {
    // Same column-major problem through classic cuBLAS, which accepts any leading dimension.
    if (!impl_->fallback) TRLHPC_CHECK_CUBLAS(cublasCreate(&impl_->fallback));
    TRLHPC_CHECK_CUBLAS(cublasSetStream(impl_->fallback, stream));
    const cublasComputeType_t compute =
        ab_type == CUDA_R_32F && impl_->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    TRLHPC_CHECK_CUBLAS(cublasGemmEx(impl_->fallback, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                     static_cast<int>(K), &alpha, b, ab_type, static_cast<int>(trans_b ? K : N), a,
                                     ab_type, static_cast<int>(trans_a ? M : K), &beta, c, c_type, static_cast<int>(N),
                                     compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TRLHPC_CHECK_CUBLAS(cublasLtMatmul(impl_->handle, p.op.get(), &alpha, b, p.a.get(), a, p.b.get(), &beta, c,
                                     p.c.get(), c, p.c.get(), &p.algo, impl_->workspace.get(),
                                     static_cast<size_t>(impl_->workspace.size()), stream));
}

template <class T>
void bias_add(T* y, const float* bias, int64_t N, int64_t C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  bias_add_kernel<<<grid_for(N * C, 256), 256, 0, stream>>>(y, bias, N, C);
  TRLHPC_CHECK_CUDA_LAUNCH("bias_add_kernel");
}

template <class T>
void bias_bwd(const T* dy, float* dbias, int64_t N, int64_t C, DeviceAllocator& allocator, cudaStream_t stream) {
  column_sum_accumulate(BiasTerm<T>{dy, C}, N, C, dbias, allocator, stream);
}

template void bias_add<float>(float*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_add<bf16>(bf16*, const float*, int64_t, int64_t, cudaStream_t);
template void bias_bwd<float>(const float*, float*, int64_t, int64_t, DeviceAllocator&, cudaStream_t);
template void bias_bwd<bf16>(const bf16*, float*, int64_t, int64_t, DeviceAllocator&, cudaStream_t);

}  // namespace trlhpc::cuda
