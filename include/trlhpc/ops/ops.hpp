#pragma once
// Ops: the only door from the model to compute kernels (ARCHITECTURE.md "The seams").
//
// Every argument is a Tensor living on the backend's device, so a CUDA backend implements the same
// interface over device memory; the model never reads a tensor element itself. Gradient convention
// follows include/trlhpc/kernels/cpu.hpp: parameter grads accumulate (+=), activation grads overwrite,
// attention_bwd accumulates dq/dk/dv. Shape letters: include/trlhpc/model/shapes.hpp.
#include <cstdint>
#include <memory>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/kernels/token_loss.hpp"

namespace trlhpc {

// TRL's logged per-token metrics (mean_token_accuracy, entropy), summed over the valid targets of one
// head evaluation: entropy of softmax(logits) in nats and targets that are the first index of their
// row's maximum logit (torch.argmax).
struct TokenMetrics {
  bool computed = false;
  double entropy_sum = 0;
  int64_t top1 = 0;
};

// The sums of one fused-loss call, possibly still being computed on the device (docs/CUDA-REVIEW-FIXES.md defect
// 6): wait() returns the summed loss over the valid targets and, when `metrics` is given, TRL's metric
// sums (metrics->computed false where the backend cannot compute them or they were not asked for).
// Waiting once per optimizer step instead of once per micro-batch lets a device backend queue the next
// micro-batch's work while this one's loss is still running.
class PendingLoss {
 public:
  virtual ~PendingLoss() = default;
  virtual double wait(TokenMetrics* metrics) = 0;
};

struct AttentionShape {
  int64_t B = 0, Tq = 0, Tk = 0, NH = 0, KVH = 0, HS = 0;
  float scale = 1.0f;
  // Sliding window (a layer property): a query at position p sees only keys at positions
  // > p - window (itself and the window - 1 before it), on top of the document + causal mask.
  // 0 = no window (full causal attention).
  int64_t window = 0;
  // Tanh softcapping (a layer property, Gemma 2's attn_logit_softcapping): each scaled score s becomes
  // softcap * tanh(s / softcap) before the mask and the softmax. 0 = none: the kernels skip it entirely.
  float softcap = 0.0f;
};

struct AdamWHyper {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  int64_t step = 1;
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;

  // ---- Mixed precision (--bf16; the recipe is docs/ARCHITECTURE.md "Mixed precision") ----
  // The dtype the decoder allocates its matmul-input activations in: F32, or BF16 under --bf16.
  // Master weights, gradients, optimizer state and the residual stream are F32 whatever it is.
  virtual DType compute_dtype() const { return DType::F32; }
  // GEMMs take the F32 master weights directly: under a BF16 compute dtype a backend's matmul rounds
  // F32 operands to bf16 as it reads them (the CPU GEMM does so while packing), so every GEMM computes
  // on bf16 operands with fp32 accumulation whatever dtype each operand is stored in.
  // dst = src converted F32 <-> BF16 (round to nearest even), or copied for equal dtypes; equal numel.
  virtual void cast(const Tensor& dst, const Tensor& src) = 0;

  // Memory. `allocate` leaves contents undefined; `zeros` clears them.
  virtual Tensor allocate(const Shape& shape, DType dtype = DType::F32) = 0;
  virtual Tensor zeros(const Shape& shape, DType dtype = DType::F32) = 0;
  virtual void fill_zero(const Tensor& t) = 0;
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;                  // same device
  virtual void copy_from_host(const Tensor& dst, const void* host, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const Tensor& src, size_t bytes) = 0;

  // ---- Host memory for CPU offload (DeepSpeed offload_optimizer / offload_param, FSDP CPUOffload) ----
  // A zero-filled tensor in host memory the device copies to and from asynchronously: page-locked
  // (pinned) on CUDA, where it carries Device::CPU; plain aligned host memory on the CPU backend, whose
  // "device" memory is host memory too. The host reads and writes it directly (the CPU AdamW kernel).
  // copy_to_host(void*, ...) and copy_from_host(...) also accept such a tensor as their device side.
  virtual Tensor allocate_host(const Shape& shape, DType dtype = DType::F32);
  // Queued copies between a device tensor and a host tensor from allocate_host (equal bytes). The host
  // side must stay untouched until wait_host_copies() returns: CUDA queues them on the backend's stream
  // (ordered after the kernels before them, and before the kernels and collectives after them); the
  // CPU backend copies at once.
  virtual void copy_to_host_async(const Tensor& host_dst, const Tensor& src);
  virtual void copy_from_host_async(const Tensor& dst, const Tensor& host_src);
  // Returns once every queued host copy is done (the host may then read or overwrite its side).
  virtual void wait_host_copies() {}

  // c (M, N) = alpha op(a) op(b) + beta c, row-major; shapes are taken from the tensors.
  virtual void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                      float alpha = 1.0f, float beta = 0.0f) = 0;
  virtual void bias_add(const Tensor& y /*(N, C)*/, const Tensor& bias /*(C)*/) = 0;
  virtual void bias_bwd(const Tensor& dy /*(N, C)*/, const Tensor& dbias /*(C) +=*/) = 0;
  virtual void add_inplace(const Tensor& y, const Tensor& x) = 0;  // y += x
  virtual void scale_inplace(const Tensor& y, float s) = 0;
  virtual double sum_of_squares(const Tensor& x) = 0;

  virtual void embedding_fwd(const Tensor& ids /*(N) I32*/, const Tensor& table /*(V, C)*/, const Tensor& out /*(N, C)*/,
                             int64_t vocab_start) = 0;
  virtual void embedding_bwd(const Tensor& ids, const Tensor& dout /*(N, C)*/, const Tensor& dtable /*(V, C) +=*/,
                             int64_t vocab_start) = 0;
  virtual void rmsnorm_fwd(const Tensor& x /*(N, C)*/, const Tensor& weight /*(C)*/, const Tensor& y,
                           const Tensor& rstd /*(N)*/, float eps) = 0;
  virtual void rmsnorm_bwd(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                           const Tensor& dx /*=*/, const Tensor& dweight /*+=; empty: none wanted*/) = 0;
  virtual void rope_fwd(const Tensor& x /*(N, H, HS) in place*/, const Tensor& pos /*(N) I32*/,
                        const Tensor& inv_freq /*(HS/2)*/) = 0;
  virtual void rope_bwd(const Tensor& dx /*(N, H, HS) in place*/, const Tensor& pos, const Tensor& inv_freq) = 0;
  // q (B,Tq,NH,HS), k/v (B,Tk,KVH,HS), positions and doc ids (B,T*) I32, o (B,Tq,NH,HS), lse (B,NH,Tq).
  virtual void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
                             const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc, const Tensor& o,
                             const Tensor& lse, const AttentionShape& s) = 0;
  virtual void attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                             const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const AttentionShape& s) = 0;
  virtual void attention_merge(const Tensor& o_acc, const Tensor& lse_acc, const Tensor& o_blk,
                               const Tensor& lse_blk, const AttentionShape& s) = 0;
  virtual void swiglu_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  virtual void swiglu_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                          const Tensor& dup) = 0;
  // Gemma's GeGLU: out = gelu_tanh(gate) * up (cpu::geglu_tanh_fwd / _bwd); dtypes as swiglu.
  virtual void geglu_tanh_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  virtual void geglu_tanh_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                              const Tensor& dup) = 0;
  // Tanh softcapping of logits (Gemma 2's final_logit_softcapping) in place: x = cap * tanh(x / cap), x F32;
  // cap > 0. The decoder applies it to the logits it returns (tests, generation); the loss applies it itself.
  virtual void logit_softcap(const Tensor& logits, float cap) = 0;
  // Fused LM head + CE (see cpu::cross_entropy_fwd_bwd). dhidden/dweight undefined Tensors = no backward.
  // Returns the summed loss over valid targets; valid_tokens receives their count. metrics (optional):
  // TRL's entropy and top-1 sums over valid targets; a backend that cannot compute them leaves
  // metrics->computed false. host_targets (optional): the same N values as `targets`, already in host
  // memory; a device backend reads them instead of copying `targets` back, which would wait for all the
  // work queued before the call (docs/CUDA-REVIEW-FIXES.md defect 6). logit_softcap > 0: the logits are softcapped
  // before the softmax (loss, metrics and dlogits are those of the capped logits, dlogits times 1 - t^2
  // back to the head's output); 0 = none, the uncapped path untouched. token_loss: label smoothing and/or
  // DFT (kernels/token_loss.hpp) replace each token's loss and dlogits; plain (the default) is untouched.
  virtual double cross_entropy_fwd_bwd(const Tensor& hidden /*(N, C)*/, const Tensor& weight /*(V, C)*/,
                                       const Tensor& targets /*(N) I32*/, float grad_scale, const Tensor& dhidden,
                                       const Tensor& dweight, int64_t chunk_tokens, int64_t* valid_tokens,
                                       TokenMetrics* metrics = nullptr, const int32_t* host_targets = nullptr,
                                       float logit_softcap = 0.0f, const TokenLoss& token_loss = {}) = 0;
  // The same call without waiting for its sums (PendingLoss); valid_tokens is filled at once, the
  // gradients are queued as usual. The default computes cross_entropy_fwd_bwd at once and returns its
  // values (the CPU backend, whose "device" is the host); the CUDA backend queues the computation and
  // synchronises only in wait() (given host_targets; without them it copies the targets back, which
  // waits, as cross_entropy_fwd_bwd does).
  virtual std::unique_ptr<PendingLoss> cross_entropy_deferred(const Tensor& hidden, const Tensor& weight,
                                                              const Tensor& targets, float grad_scale,
                                                              const Tensor& dhidden, const Tensor& dweight,
                                                              int64_t chunk_tokens, int64_t* valid_tokens,
                                                              bool want_metrics, const int32_t* host_targets,
                                                              float logit_softcap, const TokenLoss& token_loss = {});
  // Vocab-parallel cross-entropy over a chunk of this tp rank's logits (M, Vl) for vocabulary ids
  // [vocab_start, vocab_start + Vl); the decoder all-reduces between the calls (see
  // cpu::vocab_parallel_ce_*). row_max (M), sums (M, 2), targets (M) I32. Not pure: a backend without
  // them fails with a RuntimeFailure naming the op when tensor parallelism is used.
  virtual void vocab_parallel_ce_max(const Tensor& logits, const Tensor& row_max);
  virtual void vocab_parallel_ce_sums(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                      const Tensor& row_max, const Tensor& sums);
  // TRL's metrics on this rank's slice after the max is all-reduced (cpu::vocab_parallel_ce_metrics):
  // stats (M, 2). Returns false, touching nothing, on a backend without it (the metrics are then not
  // reported).
  virtual bool vocab_parallel_ce_metrics(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                         int64_t vocab_size, const Tensor& row_max, const Tensor& stats);
  // With the logits softcapped by logit_softcap (cap > 0), pass the cap: dlogits are then taken back
  // through the cap (times 1 - (z / cap)^2, z the capped logit); 0 = none.
  virtual void vocab_parallel_ce_grad(const Tensor& logits /*in: logits, out: dlogits*/, const Tensor& targets,
                                      int64_t vocab_start, const Tensor& row_max, const Tensor& sums, float grad_scale,
                                      float logit_softcap = 0.0f);
  // Label smoothing's per-row sum of this slice's logits (cpu::vocab_parallel_ce_logit_sums): logit_sums
  // (M) F32, all-reduced by sum by the decoder.
  virtual void vocab_parallel_ce_logit_sums(const Tensor& logits, const Tensor& targets, const Tensor& logit_sums);
  // vocab_parallel_ce_grad for a TokenLoss other than plain (cpu::vocab_parallel_ce_shaped_grad);
  // vocab_size: the whole vocabulary, for eps / vocab_size.
  virtual void vocab_parallel_ce_shaped_grad(const Tensor& logits /*in: logits, out: dlogits*/, const Tensor& targets,
                                             int64_t vocab_start, int64_t vocab_size, const Tensor& row_max,
                                             const Tensor& sums, float grad_scale, float logit_softcap,
                                             const TokenLoss& token_loss);
  // LoRA's input dropout (cpu::lora_dropout): x, out (N, F) of one dtype (may alias), source_rows /
  // source_columns (N) I32. Not pure: a backend without it fails with a RuntimeFailure naming the op.
  virtual void lora_dropout(const Tensor& x, const Tensor& out, const Tensor& source_rows, const Tensor& source_columns,
                            int64_t feature_offset, float p, uint64_t key);
  // NEFTune's noise (cpu::embedding_noise), in place on x (N, C) F32 or BF16 (added in fp32, rounded
  // once); source_rows / source_columns (N) I32. Not pure: a backend without it fails naming the op.
  virtual void embedding_noise(const Tensor& x, const Tensor& source_rows, const Tensor& source_columns, float magnitude,
                               uint64_t key);
  // AdamW on F32 param, grad, m, v of equal numel. compute: an empty Tensor, or a BF16 tensor of the
  // same numel that receives bf16(updated param) in the same pass (the --bf16 compute copy, exactly what
  // cast would write).
  virtual void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const AdamWHyper& h, const Tensor& compute) = 0;
};

// The CPU backend (OpenMP; fp32 GEMMs on trlhpc's AVX-512 kernel or OpenBLAS). compute_dtype BF16
// (--bf16): every GEMM is the mixed-precision one (operands rounded to bf16, fp32 accumulation,
// kernels/cpu/gemm_bf16.cpp) and the other ops take the BF16 activations of the table in
// include/trlhpc/ops/cuda_ops.hpp, computing in fp32.
std::unique_ptr<Ops> make_cpu_ops(DType compute_dtype = DType::F32);

}  // namespace trlhpc
