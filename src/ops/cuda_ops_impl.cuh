#pragma once
// The CudaOps implementation class, shared by src/ops/cuda_ops.cu (memory, the model's ops) and
// src/ops/cuda_ops_precision.cu (casts, AdamW). See include/trlhpc/ops/cuda_ops.hpp.
//
// Every op: check devices, dtypes and sizes on the host (errors name the op and the shapes), open a
// timing scope, call the launcher of kernels/cuda on the backend's stream (launchers check their
// launches). Nothing synchronises except host copies and the ops that return a host value.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cuda_raii.cuh"
#include "cudnn_attention.hpp"
#include "device_allocator.cuh"
#include "trlhpc/kernels/attention_smem_plan.hpp"
#include "matmul.cuh"
#include "op_timer.cuh"
#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/cuda_ops.hpp"

namespace trlhpc::cuda_backend {

using bf16 = __nv_bfloat16;

// A type tag for dtype dispatch: with_float_type(dtype, f) calls f(Tag<float>{}) or f(Tag<bf16>{}).
template <class T>
struct Tag {
  using type = T;
};

template <class F>
void with_float_type(DType dtype, const char* op, F&& f) {
  if (dtype == DType::F32)
    f(Tag<float>{});
  else if (dtype == DType::BF16)
    f(Tag<bf16>{});
  else
    throw_runtime_failure("trlhpc", op, std::string("unsupported dtype ") + dtype_name(dtype) + " (F32 or BF16)",
                          __FILE__, __LINE__);
}

template <class T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.data());
}

class CudaOpsImpl final : public CudaOps {
 public:
  CudaOpsImpl(int device, const CudaOpsOptions& options);
  ~CudaOpsImpl() override;

  // ---- Ops -------------------------------------------------------------------------------------------
  Device device() const override { return Device::CUDA; }
  Tensor allocate(const Shape& shape, DType dtype) override;
  Tensor zeros(const Shape& shape, DType dtype) override;
  void fill_zero(const Tensor& t) override;
  void copy(const Tensor& dst, const Tensor& src) override;
  void copy_from_host(const Tensor& dst, const void* host, size_t bytes) override;
  void copy_to_host(void* host, const Tensor& src, size_t bytes) override;
  Tensor allocate_host(const Shape& shape, DType dtype) override;
  void copy_to_host_async(const Tensor& host_dst, const Tensor& src) override;
  void copy_from_host_async(const Tensor& dst, const Tensor& host_src) override;
  void wait_host_copies() override { stream_.synchronize(); }

  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, float alpha,
              float beta) override;
  // `t` itself, or (BF16 compute dtype, F32 t) a BF16 scratch copy of it rounded to nearest even.
  Tensor bf16_operand(const Tensor& t);
  // `t` itself (F32), or a BF16 vector (a norm weight or bias from a bf16 compute copy, --bf16) widened
  // exactly into an F32 scratch copy: what the CPU backend's Fp32Window does for the same operands.
  Tensor f32_vector(const Tensor& t, const char* op);
  void bias_add(const Tensor& y, const Tensor& bias) override;
  void bias_bwd(const Tensor& dy, const Tensor& dbias) override;
  void add_inplace(const Tensor& y, const Tensor& x) override;
  void scale_inplace(const Tensor& y, float s) override;
  double sum_of_squares(const Tensor& x) override;

  void embedding_fwd(const Tensor& ids, const Tensor& table, const Tensor& out, int64_t vocab_start) override;
  void embedding_bwd(const Tensor& ids, const Tensor& dout, const Tensor& dtable, int64_t vocab_start) override;
  void rmsnorm_fwd(const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd, float eps) override;
  void rmsnorm_bwd(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                   const Tensor& dweight) override;
  void rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq) override;
  void rope_bwd(const Tensor& dx, const Tensor& pos, const Tensor& inv_freq) override;
  void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& k_pos,
                     const Tensor& q_doc, const Tensor& k_doc, const Tensor& o, const Tensor& lse,
                     const AttentionShape& s) override;
  void attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                     const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                     const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const AttentionShape& s) override;
  void attention_merge(const Tensor& o_acc, const Tensor& lse_acc, const Tensor& o_blk, const Tensor& lse_blk,
                       const AttentionShape& s) override;
  void embedding_noise(const Tensor& x, const Tensor& source_rows, const Tensor& source_columns, float magnitude,
                       uint64_t key) override;
  void lora_dropout(const Tensor& x, const Tensor& out, const Tensor& source_rows, const Tensor& source_columns,
                    int64_t feature_offset, float p, uint64_t key) override;
  void swiglu_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void swiglu_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                  const Tensor& dup) override;
  void geglu_tanh_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void geglu_tanh_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                  const Tensor& dup) override;
  double cross_entropy_fwd_bwd(const Tensor& hidden, const Tensor& weight, const Tensor& targets, float grad_scale,
                               const Tensor& dhidden, const Tensor& dweight, int64_t chunk_tokens,
                               int64_t* valid_tokens, TokenMetrics* metrics = nullptr,
                               const int32_t* host_targets = nullptr, float logit_softcap = 0.0f,
                               const TokenLoss& token_loss = {}) override;
  std::unique_ptr<PendingLoss> cross_entropy_deferred(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                                                      float grad_scale, const Tensor& dhidden, const Tensor& dweight,
                                                      int64_t chunk_tokens, int64_t* valid_tokens, bool want_metrics,
                                                      const int32_t* host_targets, float logit_softcap,
                                                      const TokenLoss& token_loss = {}) override;
  void logit_softcap(const Tensor& logits, float cap) override;
  void vocab_parallel_ce_max(const Tensor& logits, const Tensor& row_max) override;
  void vocab_parallel_ce_sums(const Tensor& logits, const Tensor& targets, int64_t vocab_start, const Tensor& row_max,
                              const Tensor& sums) override;
  bool vocab_parallel_ce_metrics(const Tensor& logits, const Tensor& targets, int64_t vocab_start, int64_t vocab_size,
                                 const Tensor& row_max, const Tensor& stats) override;
  void vocab_parallel_ce_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start, const Tensor& row_max,
                              const Tensor& sums, float grad_scale, float logit_softcap = 0.0f) override;
  void vocab_parallel_ce_logit_sums(const Tensor& logits, const Tensor& targets, const Tensor& logit_sums) override;
  void vocab_parallel_ce_shaped_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                     int64_t vocab_size, const Tensor& row_max, const Tensor& sums, float grad_scale,
                                     float logit_softcap, const TokenLoss& token_loss) override;
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  const Tensor& compute) override;

  // ---- CudaOps extras --------------------------------------------------------------------------------
  int device_index() const override { return device_; }
  void cast(const Tensor& dst, const Tensor& src) override;
  void adamw_step_many(const std::vector<AdamWSegment>& segments) override;
  void synchronize() override { stream_.synchronize(); }
  void* stream_handle() const override { return static_cast<void*>(stream_.get()); }
  std::function<void(const void*, void*)> stream_use_recorder() const override {
    return [allocator = allocator_](const void* ptr, void* stream) {
      allocator->record_stream(ptr, static_cast<cudaStream_t>(stream));
    };
  }
  DeviceMemoryStats memory_stats() const override { return allocator_->stats(); }
  void reset_peak_memory() override { allocator_->reset_peak(); }
  std::vector<OpTiming> op_timings() override { return timer_.totals(); }
  void reset_op_timings() override { timer_.reset(); }
  int64_t cudnn_attention_calls() const override { return cudnn_attention_calls_; }

 private:
  cudaStream_t stream() const { return stream_.get(); }
  cuda::OpTimer::Scope timed(const char* op) { return timer_.scope(op, stream_.get()); }
  // cuDNN's fused attention for the calls it expresses (cuda_ops_attention_route.cu); false: the caller
  // runs the hand-written kernel. CudaOpsOptions::attention (--cuda_attention) chooses.
  std::optional<kernels::PackedSequences> cudnn_attention_layout(const Tensor& q, const Tensor& q_pos,
                                                                 const Tensor& k_pos, const Tensor& q_doc,
                                                                 const Tensor& k_doc, const AttentionShape& s);
  bool try_cudnn_attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
                               const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc, const Tensor& o,
                               const Tensor& lse, const AttentionShape& s);
  bool try_cudnn_attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                               const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                               const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const AttentionShape& s);

  int device_;
  CudaOpsOptions options_;
  kernels::SmemLimits smem_limits_;  // the device's shared memory (attention tile choice)
  std::shared_ptr<cuda::DeviceAllocator> allocator_;  // first: outlives everything drawn from it
  cuda::CudaStream stream_;
  std::unique_ptr<cuda::Matmul> matmul_;
  cuda::OpTimer timer_;
  cuda::DeviceBuffer<double> host_value_;  // (1) device landing slot of sum_of_squares
  std::unique_ptr<cuda::CudnnAttention> cudnn_attention_;              // made on the first cuDNN call
  int64_t cudnn_attention_calls_ = 0;
};

// Checks shared by both files. `what` names the op and the argument.
void expect_cuda(const Tensor& t, const char* what);
void expect_dtype(const Tensor& t, DType dtype, const char* what);
void expect_numel(const Tensor& t, int64_t numel, const char* what);

}  // namespace trlhpc::cuda_backend
