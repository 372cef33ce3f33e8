#pragma once
// The CUDA backend of Ops (ARCHITECTURE.md "The seams"): kernels in kernels/cuda, GEMMs on cuBLASLt,
// all work ordered on one CUDA stream per backend, device memory from a caching allocator.
//
// Declared only in CUDA builds (TRLHPC_HAVE_CUDA): code of a CPU-only build never references it.
// A CUDA build still runs without a GPU: ask trlhpc::cuda::visible_device_count() (device_query.cuh)
// before calling make_cuda_backend, which throws RuntimeFailure when the device cannot be used.
//
// Semantics are exactly those of the CPU backend (include/trlhpc/kernels/cpu.hpp): same shapes, same
// gradient convention (parameter grads +=, activation grads =, attention_bwd +=), same masks. Every
// call is asynchronous on the backend's stream except those returning a host value
// (sum_of_squares, cross_entropy_fwd_bwd) and the host copies, which synchronise.
//
// ---- Mixed precision (bf16 compute, fp32 master) ----------------------------------------------------
// Tensors passed to the ops may be F32 or BF16 where the table below allows it; arithmetic is fp32
// everywhere (accumulators, softmax and norm statistics, GEMM accumulation), BF16 is storage only.
//   matmul                 a, b F32 or BF16 (F32 rounded to BF16 under a BF16 compute dtype, else both F32
//                          or both BF16); c F32 or BF16 (fp32 accumulate, beta on c in fp32)
//   bias_add / bias_bwd    y, dy F32|BF16; bias F32|BF16 (widened), dbias F32
//   add_inplace            (y, x) = (F32, F32) | (BF16, BF16) | (F32, BF16)
//   scale_inplace, sum_of_squares  F32 | BF16
//   embedding_fwd          table F32|BF16, out F32|BF16;  embedding_bwd: dout F32|BF16, dtable F32
//   rmsnorm_fwd            x F32|BF16, y F32|BF16, weight F32|BF16 (widened), rstd F32
//   rmsnorm_bwd            x F32|BF16, dy and dx the same dtype F32|BF16, weight F32|BF16, rstd/dweight F32
//   rope, swiglu, attention_fwd/bwd/merge   one dtype F32|BF16 for every activation; lse F32
//   cross_entropy_fwd_bwd  hidden and weight the same dtype; dhidden F32|BF16; dweight F32
//   adamw_step             F32 (the master copy); optionally writes the BF16 compute copy in the same pass
//   cast (CudaOps)         F32 <-> BF16, round to nearest even
// The decoder runs this recipe under --bf16 on the CPU backend (docs/ARCHITECTURE.md "Mixed precision":
// the activations above in compute_dtype(), the residual stream, dq/dk/dv and all gradients F32, dx cast
// to the compute dtype before the o_proj/down_proj backward GEMMs). It hands the weights' BF16 compute
// copies (ParameterUnit::compute, refreshed by the data-parallel strategy; docs/ARCHITECTURE.md "bf16
// compute copies"), and F32 dq/dk/dv and dlogits, to matmul; CudaOps::matmul rounds an F32 operand into a
// BF16 scratch copy first (the CPU GEMM rounds it as it packs: same numbers). Norm weights and biases
// may come BF16 (widened to F32 for their kernels). Compiled here; not yet run on a GPU.
#if defined(TRLHPC_HAVE_CUDA)

#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/kernels/attention_route.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

struct CudaOpsOptions {
  // Activations' dtype for a model that asks compute_dtype() (F32 or BF16; see the header comment).
  DType compute_dtype = DType::F32;
  // F32 x F32 GEMMs on TF32 tensor cores (10-bit mantissa inputs, fp32 accumulate): about 8x faster
  // on Hopper, relative error ~1e-3 instead of ~1e-6.
  bool allow_tf32 = false;
  // Record a cudaEvent pair around every op and report per-op GPU time (op_timings()); for benchmarks.
  bool time_ops = false;
  // cuDNN's fused attention or the hand-written kernel (--cuda_attention; kernels/attention_route.hpp).
  kernels::AttentionPreference attention = kernels::AttentionPreference::Auto;
  // cuBLASLt workspace, allocated once and reused by every GEMM.
  int64_t matmul_workspace_bytes = int64_t{32} << 20;
};

// Device memory of one backend, in bytes. "in use" counts blocks held by tensors and scratch buffers
// at their size-class rounded size; "reserved" adds the blocks cached for reuse.
struct DeviceMemoryStats {
  int64_t in_use_bytes = 0, peak_in_use_bytes = 0;
  int64_t reserved_bytes = 0, peak_reserved_bytes = 0;
  int64_t device_mallocs = 0, device_frees = 0;  // cudaMalloc / cudaFree calls so far
};

// Summed GPU time of one op (CudaOpsOptions::time_ops).
struct OpTiming {
  std::string name;
  int64_t calls = 0;
  double milliseconds = 0;
};

// One piece of a multi-tensor AdamW step: param, grad, m, v are F32 tensors of equal numel; compute
// empty or the BF16 tensor (same numel) that receives bf16 of the updated param (Ops::adamw_step).
struct AdamWSegment {
  Tensor param, grad, m, v;
  AdamWHyper hyper;
  Tensor compute;
};

class CudaOps : public Ops {
 public:
  virtual int device_index() const = 0;
  DType compute_dtype() const override { return compute_dtype_; }

  // dst = src converted (F32 <-> BF16, or a plain copy for equal dtypes); equal numel.
  void cast(const Tensor& dst, const Tensor& src) override = 0;
  // Several AdamW updates, up to 32 tensors per kernel launch (same math as adamw_step).
  virtual void adamw_step_many(const std::vector<AdamWSegment>& segments) = 0;

  // Waits for all queued work.
  virtual void synchronize() = 0;
  // The cudaStream_t (as void*) every op is queued on: a communicator working on the backend's tensors
  // (NCCL) must order its stream after it (cudaEventRecord here, cudaStreamWaitEvent there) and back.
  virtual void* stream_handle() const = 0;
  // Tells the caching allocator that work queued on another stream (cudaStream_t as void*) uses the
  // block containing a device address: the block is reused only after that work completes, even if
  // the tensor is dropped first (stream-ordered release, device_allocator.cuh). The function keeps the
  // allocator alive, so it may outlive this backend. The NCCL communicator calls it for the buffers of
  // its async collectives on its comm stream.
  virtual std::function<void(const void* device_ptr, void* stream)> stream_use_recorder() const = 0;
  virtual DeviceMemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;
  // Per-op GPU time since the last reset, sorted by time (synchronises). Empty unless time_ops.
  virtual std::vector<OpTiming> op_timings() = 0;
  virtual void reset_op_timings() = 0;
  // Attention calls (fwd + bwd) that ran through cuDNN's fused SDPA rather than the hand-written kernel
  // (--cuda_attention, kernels/attention_route.hpp): how tests and benchmarks see which one ran.
  virtual int64_t cudnn_attention_calls() const { return 0; }

 protected:
  explicit CudaOps(DType compute_dtype) : compute_dtype_(compute_dtype) {}

 private:
  DType compute_dtype_;
};

// The CUDA backend on GPU `device` (an index among the visible devices), typed so callers reach the
// CudaOps extras.
std::unique_ptr<CudaOps> make_cuda_backend(int device, const CudaOpsOptions& options = {});
// The CudaOps behind an Ops, or nullptr for another backend.
CudaOps* as_cuda_ops(Ops& ops);

}  // namespace trlhpc

#endif  // TRLHPC_HAVE_CUDA
