// The CUDA implementation of Ops, part 2: the model's layer ops (embedding, RMSNorm, RoPE, attention,
// SwiGLU, the fused and the vocab-parallel cross-entropy). Part 1 is cuda_ops.cu.
#include <cmath>
#include <string>
#include <type_traits>

#include "attention.cuh"
#include "cross_entropy.cuh"
#include "cuda_ops_impl.cuh"
#include "elementwise.cuh"
#include "embedding.cuh"
#include "rmsnorm.cuh"
#include "rope.cuh"
#include "embedding_noise.cuh"
#include "lora_dropout.cuh"
#include "geglu.cuh"
#include "swiglu.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "vocab_parallel_cross_entropy.cuh"

namespace trlhpc::cuda_backend {

void CudaOpsImpl::embedding_fwd(const Tensor& ids, const Tensor& table, const Tensor& out, int64_t vocab_start) {
  expect_dtype(ids, DType::I32, "embedding_fwd ids");
  TRLHPC_ASSERT(table.rank() == 2, "embedding_fwd: table must be (V, C)");
  const int64_t N = ids.numel(), V = table.dim(0), C = table.dim(1);
  expect_numel(out, N * C, "embedding_fwd out");
  for (const Tensor* t : {&ids, &table, &out}) expect_cuda(*t, "embedding_fwd");
  const auto timing = timed("embedding_fwd");
  with_float_type(table.dtype(), "embedding_fwd table", [&](auto table_tag) {
    using TT = typename decltype(table_tag)::type;
    with_float_type(out.dtype(), "embedding_fwd out", [&](auto out_tag) {
      using TO = typename decltype(out_tag)::type;
      cuda::embedding_fwd(data_of<int32_t>(ids), data_of<TT>(table), data_of<TO>(out), N, C, V, vocab_start, stream());
    });
  });
}

void CudaOpsImpl::embedding_bwd(const Tensor& ids, const Tensor& dout, const Tensor& dtable, int64_t vocab_start) {
  expect_dtype(ids, DType::I32, "embedding_bwd ids");
  expect_dtype(dtable, DType::F32, "embedding_bwd dtable");
  TRLHPC_ASSERT(dtable.rank() == 2, "embedding_bwd: dtable must be (V, C)");
  const int64_t N = ids.numel(), V = dtable.dim(0), C = dtable.dim(1);
  expect_numel(dout, N * C, "embedding_bwd dout");
  for (const Tensor* t : {&ids, &dout, &dtable}) expect_cuda(*t, "embedding_bwd");
  const auto timing = timed("embedding_bwd");
  with_float_type(dout.dtype(), "embedding_bwd dout", [&](auto tag) {
    using TD = typename decltype(tag)::type;
    cuda::embedding_bwd(data_of<int32_t>(ids), data_of<TD>(dout), data_of<float>(dtable), N, C, V, vocab_start,
                        *allocator_, stream());
  });
}

void CudaOpsImpl::rmsnorm_fwd(const Tensor& x, const Tensor& weight_in, const Tensor& y, const Tensor& rstd, float eps) {
  const Tensor weight = f32_vector(weight_in, "rmsnorm_fwd weight");
  expect_dtype(rstd, DType::F32, "rmsnorm_fwd rstd");
  const int64_t C = weight.numel(), N = C ? x.numel() / C : 0;
  expect_numel(y, x.numel(), "rmsnorm_fwd y");
  expect_numel(rstd, N, "rmsnorm_fwd rstd");
  for (const Tensor* t : {&x, &weight, &y, &rstd}) expect_cuda(*t, "rmsnorm_fwd");
  const auto timing = timed("rmsnorm_fwd");
  if (x.dtype() == DType::F32 && y.dtype() == DType::F32)
    cuda::rmsnorm_fwd(data_of<float>(x), data_of<float>(weight), data_of<float>(y), data_of<float>(rstd), N, C, eps,
                      stream());
  else if (x.dtype() == DType::F32 && y.dtype() == DType::BF16)
    cuda::rmsnorm_fwd(data_of<float>(x), data_of<float>(weight), data_of<bf16>(y), data_of<float>(rstd), N, C, eps,
                      stream());
  else if (x.dtype() == DType::BF16 && y.dtype() == DType::BF16)
    cuda::rmsnorm_fwd(data_of<bf16>(x), data_of<float>(weight), data_of<bf16>(y), data_of<float>(rstd), N, C, eps,
                      stream());
  else
    TRLHPC_ASSERT(false, std::string("rmsnorm_fwd: unsupported dtypes x ") + dtype_name(x.dtype()) + ", y " +
                             dtype_name(y.dtype()));
}

void CudaOpsImpl::rmsnorm_bwd(const Tensor& x, const Tensor& weight_in, const Tensor& rstd, const Tensor& dy,
                              const Tensor& dx, const Tensor& dweight) {
  const Tensor weight = f32_vector(weight_in, "rmsnorm_bwd weight");
  expect_dtype(rstd, DType::F32, "rmsnorm_bwd rstd");
  const bool wants_dweight = dweight.data() != nullptr;  // empty: a frozen norm, no weight gradient
  if (wants_dweight) expect_dtype(dweight, DType::F32, "rmsnorm_bwd dweight");
  TRLHPC_ASSERT(dy.dtype() == dx.dtype(), "rmsnorm_bwd: dy and dx must share a dtype");
  const int64_t C = weight.numel(), N = C ? x.numel() / C : 0;
  expect_numel(dy, x.numel(), "rmsnorm_bwd dy");
  expect_numel(dx, x.numel(), "rmsnorm_bwd dx");
  if (wants_dweight) expect_numel(dweight, C, "rmsnorm_bwd dweight");
  for (const Tensor* t : {&x, &weight, &rstd, &dy, &dx}) expect_cuda(*t, "rmsnorm_bwd");
  if (wants_dweight) expect_cuda(dweight, "rmsnorm_bwd");
  const auto timing = timed("rmsnorm_bwd");
  with_float_type(x.dtype(), "rmsnorm_bwd x", [&](auto x_tag) {
    using TX = typename decltype(x_tag)::type;
    with_float_type(dy.dtype(), "rmsnorm_bwd dy", [&](auto d_tag) {
      using TD = typename decltype(d_tag)::type;
      cuda::rmsnorm_bwd(data_of<TX>(x), data_of<float>(weight), data_of<float>(rstd), data_of<TD>(dy), data_of<TD>(dx),
                        wants_dweight ? data_of<float>(dweight) : nullptr, N, C, *allocator_, stream());
    });
  });
}

void CudaOpsImpl::rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq) {
  expect_dtype(pos, DType::I32, "rope_fwd pos");
  expect_dtype(inv_freq, DType::F32, "rope_fwd inv_freq");
  const int64_t HS = inv_freq.numel() * 2, N = pos.numel(), H = N && HS ? x.numel() / (N * HS) : 0;
  expect_numel(x, N * H * HS, "rope_fwd x");
  for (const Tensor* t : {&x, &pos, &inv_freq}) expect_cuda(*t, "rope_fwd");
  const auto timing = timed("rope_fwd");
  with_float_type(x.dtype(), "rope_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::rope_fwd(data_of<T>(x), data_of<int32_t>(pos), data_of<float>(inv_freq), N, H, HS, stream());
  });
}

void CudaOpsImpl::rope_bwd(const Tensor& dx, const Tensor& pos, const Tensor& inv_freq) {
  expect_dtype(pos, DType::I32, "rope_bwd pos");
  expect_dtype(inv_freq, DType::F32, "rope_bwd inv_freq");
  const int64_t HS = inv_freq.numel() * 2, N = pos.numel(), H = N && HS ? dx.numel() / (N * HS) : 0;
  expect_numel(dx, N * H * HS, "rope_bwd dx");
  for (const Tensor* t : {&dx, &pos, &inv_freq}) expect_cuda(*t, "rope_bwd");
  const auto timing = timed("rope_bwd");
  with_float_type(dx.dtype(), "rope_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::rope_bwd(data_of<T>(dx), data_of<int32_t>(pos), data_of<float>(inv_freq), N, H, HS, stream());
  });
}

namespace {

cuda::AttentionDims attention_dims(const AttentionShape& s) {
  TRLHPC_ASSERT(s.NH < (int64_t{1} << 30) && s.KVH < (int64_t{1} << 30) && s.HS < (int64_t{1} << 30),
                "attention: head counts out of range");
  TRLHPC_ASSERT(s.window >= 0, "attention: sliding window " + std::to_string(s.window) + " is negative (0 = none)");
  return cuda::AttentionDims{s.B, s.Tq, s.Tk, static_cast<int>(s.NH), static_cast<int>(s.KVH),
                             static_cast<int>(s.HS), s.scale, s.window, s.softcap};
}

// The outputs' element type of an attention op on inputs T: T itself, or float (fp32 accumulators of
// bf16 inputs: ring attention rounds once at the end, docs/CUDA-REVIEW-FIXES.md defect 1).
template <class T, class F>
void with_output_type(DType out, F&& f) {
  if (out == DType::F32) return f(Tag<float>{});
  if constexpr (std::is_same_v<T, bf16>)
    if (out == DType::BF16) return f(Tag<bf16>{});
  throw_runtime_failure("trlhpc", "attention", std::string("output dtype ") + dtype_name(out) +
                                                   " with fp32 inputs (outputs: the inputs' dtype or F32)",
                        __FILE__, __LINE__);
}

// q-side (B, Tq, NH, HS), k-side (B, Tk, KVH, HS), ids (B, T*), lse (B, NH, Tq).
void check_attention_tensors(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc,
                             const Tensor& o, const Tensor& lse, const char* op) {
  for (const Tensor* t : {&q, &o}) expect_numel(*t, s.B * s.Tq * s.NH * s.HS, op);
  for (const Tensor* t : {&k, &v}) expect_numel(*t, s.B * s.Tk * s.KVH * s.HS, op);
  for (const Tensor* t : {&q_pos, &q_doc}) expect_numel(*t, s.B * s.Tq, op), expect_dtype(*t, DType::I32, op);
  for (const Tensor* t : {&k_pos, &k_doc}) expect_numel(*t, s.B * s.Tk, op), expect_dtype(*t, DType::I32, op);
  expect_numel(lse, s.B * s.NH * s.Tq, op);
  expect_dtype(lse, DType::F32, op);
  for (const Tensor* t : {&k, &v})
    TRLHPC_ASSERT(t->dtype() == q.dtype(), std::string(op) + ": q, k, v must share a dtype");
  TRLHPC_ASSERT(o.dtype() == q.dtype() || o.dtype() == DType::F32,
                std::string(op) + ": o must have q's dtype or F32 (an fp32 accumulator of bf16 attention)");
  for (const Tensor* t : {&q, &k, &v, &q_pos, &k_pos, &q_doc, &k_doc, &o, &lse}) expect_cuda(*t, op);
}

}  // namespace

void CudaOpsImpl::attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
                                const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc, const Tensor& o,
                                const Tensor& lse, const AttentionShape& s) {
  check_attention_tensors(s, q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, "attention_fwd");
  const auto timing = timed("attention_fwd");
  if (try_cudnn_attention_fwd(q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, s)) {  // else: the kernel
    ++cudnn_attention_calls_;
    return;
  }
  with_float_type(q.dtype(), "attention_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_output_type<T>(o.dtype(), [&](auto out_tag) {
      using G = typename decltype(out_tag)::type;
      cuda::attention_fwd(data_of<T>(q), data_of<T>(k), data_of<T>(v), data_of<int32_t>(q_pos),
                          data_of<int32_t>(k_pos), data_of<int32_t>(q_doc), data_of<int32_t>(k_doc), data_of<G>(o),
                          data_of<float>(lse), attention_dims(s), smem_limits_, *allocator_, stream());
    });
  });
}

void CudaOpsImpl::attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                                const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                                const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                const AttentionShape& s) {
  check_attention_tensors(s, q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, "attention_bwd");
  for (const Tensor* t : {&dout, &dq}) expect_numel(*t, q.numel(), "attention_bwd dout/dq");
  for (const Tensor* t : {&dk, &dv}) expect_numel(*t, k.numel(), "attention_bwd dk/dv");
  for (const Tensor* t : {&dout, &dq, &dk, &dv}) expect_cuda(*t, "attention_bwd");
  TRLHPC_ASSERT(dout.dtype() == q.dtype(), "attention_bwd: dout must share q's dtype");
  for (const Tensor* t : {&dk, &dv})
    TRLHPC_ASSERT(t->dtype() == dq.dtype(), "attention_bwd: dq, dk, dv must share a dtype (q's, or F32)");
  const auto timing = timed("attention_bwd");
  if (try_cudnn_attention_bwd(q, k, v, o, lse, dout, q_pos, k_pos, q_doc, k_doc, dq, dk, dv, s)) {
    ++cudnn_attention_calls_;
    return;
  }
  with_float_type(q.dtype(), "attention_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_output_type<T>(dq.dtype(), [&](auto out_tag) {
      using G = typename decltype(out_tag)::type;
      cuda::attention_bwd(data_of<T>(q), data_of<T>(k), data_of<T>(v), data_of<T>(o), data_of<float>(lse),
                          data_of<T>(dout), data_of<int32_t>(q_pos), data_of<int32_t>(k_pos), data_of<int32_t>(q_doc),
                          data_of<int32_t>(k_doc), data_of<G>(dq), data_of<G>(dk), data_of<G>(dv), attention_dims(s),
                          smem_limits_, *allocator_, stream());
    });
  });
}

void CudaOpsImpl::attention_merge(const Tensor& o_acc, const Tensor& lse_acc, const Tensor& o_blk,
                                  const Tensor& lse_blk, const AttentionShape& s) {
  for (const Tensor* t : {&o_acc, &o_blk}) expect_numel(*t, s.B * s.Tq * s.NH * s.HS, "attention_merge o");
  for (const Tensor* t : {&lse_acc, &lse_blk}) {
    expect_numel(*t, s.B * s.NH * s.Tq, "attention_merge lse");
    expect_dtype(*t, DType::F32, "attention_merge lse");
  }
  TRLHPC_ASSERT(o_acc.dtype() == o_blk.dtype(), "attention_merge: o_acc and o_blk must share a dtype");
  for (const Tensor* t : {&o_acc, &lse_acc, &o_blk, &lse_blk}) expect_cuda(*t, "attention_merge");
  const auto timing = timed("attention_merge");
  with_float_type(o_acc.dtype(), "attention_merge", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::attention_merge(data_of<T>(o_acc), data_of<float>(lse_acc), data_of<T>(o_blk), data_of<float>(lse_blk), s.B,
                          s.Tq, static_cast<int>(s.NH), static_cast<int>(s.HS), stream());
  });
}

void CudaOpsImpl::lora_dropout(const Tensor& x, const Tensor& out, const Tensor& source_rows,
                               const Tensor& source_columns, int64_t feature_offset, float p, uint64_t key) {
  TRLHPC_ASSERT(x.rank() == 2 && x.dtype() == out.dtype(), "lora_dropout: x and out must be (N, F) of one dtype");
  expect_numel(out, x.numel(), "lora_dropout out");
  expect_dtype(source_rows, DType::I32, "lora_dropout source_rows");
  expect_dtype(source_columns, DType::I32, "lora_dropout source_columns");
  expect_numel(source_rows, x.dim(0), "lora_dropout source_rows");
  expect_numel(source_columns, x.dim(0), "lora_dropout source_columns");
  for (const Tensor* t : {&x, &out, &source_rows, &source_columns}) expect_cuda(*t, "lora_dropout");
  const auto timing = timed("lora_dropout");
  with_float_type(x.dtype(), "lora_dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::lora_dropout(data_of<T>(x), data_of<T>(out), data_of<int32_t>(source_rows), data_of<int32_t>(source_columns),
                       x.dim(0), x.dim(1), feature_offset, p, key, stream());
  });
}

void CudaOpsImpl::embedding_noise(const Tensor& x, const Tensor& source_rows, const Tensor& source_columns,
                                  float magnitude, uint64_t key) {
  TRLHPC_ASSERT(x.rank() == 2, "embedding_noise: x must be (N, C)");
  expect_dtype(source_rows, DType::I32, "embedding_noise source_rows");
  expect_dtype(source_columns, DType::I32, "embedding_noise source_columns");
  expect_numel(source_rows, x.dim(0), "embedding_noise source_rows");
  expect_numel(source_columns, x.dim(0), "embedding_noise source_columns");
  for (const Tensor* t : {&x, &source_rows, &source_columns}) expect_cuda(*t, "embedding_noise");
  const auto timing = timed("embedding_noise");
  with_float_type(x.dtype(), "embedding_noise", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::embedding_noise(data_of<T>(x), data_of<int32_t>(source_rows), data_of<int32_t>(source_columns), x.dim(0),
                          x.dim(1), magnitude, key, stream());
  });
}

void CudaOpsImpl::swiglu_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) {
  for (const Tensor* t : {&up, &out}) {
    expect_numel(*t, gate.numel(), "swiglu_fwd");
    TRLHPC_ASSERT(t->dtype() == gate.dtype(), "swiglu_fwd: gate, up, out must share a dtype");
  }
  for (const Tensor* t : {&gate, &up, &out}) expect_cuda(*t, "swiglu_fwd");
  const auto timing = timed("swiglu_fwd");
  with_float_type(gate.dtype(), "swiglu_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::swiglu_fwd(data_of<T>(gate), data_of<T>(up), data_of<T>(out), gate.numel(), stream());
  });
}

void CudaOpsImpl::swiglu_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                             const Tensor& dup) {
  for (const Tensor* t : {&up, &dout, &dgate, &dup}) {
    expect_numel(*t, gate.numel(), "swiglu_bwd");
    TRLHPC_ASSERT(t->dtype() == gate.dtype(), "swiglu_bwd: every tensor must share gate's dtype");
  }
  for (const Tensor* t : {&gate, &up, &dout, &dgate, &dup}) expect_cuda(*t, "swiglu_bwd");
  const auto timing = timed("swiglu_bwd");
  with_float_type(gate.dtype(), "swiglu_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::swiglu_bwd(data_of<T>(gate), data_of<T>(up), data_of<T>(dout), data_of<T>(dgate), data_of<T>(dup),
                     gate.numel(), stream());
  });
}

void CudaOpsImpl::geglu_tanh_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) {
  for (const Tensor* t : {&up, &out}) {
    expect_numel(*t, gate.numel(), "geglu_tanh_fwd");
    TRLHPC_ASSERT(t->dtype() == gate.dtype(), "geglu_tanh_fwd: gate, up, out must share a dtype");
  }
  for (const Tensor* t : {&gate, &up, &out}) expect_cuda(*t, "geglu_tanh_fwd");
  const auto timing = timed("geglu_tanh_fwd");
  with_float_type(gate.dtype(), "geglu_tanh_fwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::geglu_tanh_fwd(data_of<T>(gate), data_of<T>(up), data_of<T>(out), gate.numel(), stream());
  });
}

void CudaOpsImpl::geglu_tanh_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                             const Tensor& dup) {
  for (const Tensor* t : {&up, &dout, &dgate, &dup}) {
    expect_numel(*t, gate.numel(), "geglu_tanh_bwd");
    TRLHPC_ASSERT(t->dtype() == gate.dtype(), "geglu_tanh_bwd: every tensor must share gate's dtype");
  }
  for (const Tensor* t : {&gate, &up, &dout, &dgate, &dup}) expect_cuda(*t, "geglu_tanh_bwd");
  const auto timing = timed("geglu_tanh_bwd");
  with_float_type(gate.dtype(), "geglu_tanh_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::geglu_tanh_bwd(data_of<T>(gate), data_of<T>(up), data_of<T>(dout), data_of<T>(dgate), data_of<T>(dup),
                     gate.numel(), stream());
  });
}

namespace {
// The per-token sums of a queued fused loss, read (and waited for) once.
class CudaPendingLoss final : public PendingLoss {
 public:
  explicit CudaPendingLoss(cuda::PendingLossRows rows) : rows_(std::move(rows)) {}
  double wait(TokenMetrics* metrics) override {
    TRLHPC_ASSERT(!read_, "PendingLoss::wait: called twice");
    read_ = true;
    cuda::LossMetricSums sums;
    const double loss = rows_.read(metrics ? &sums : nullptr);
    rows_ = cuda::PendingLossRows{};  // the row buffers go back to the allocator now
    if (metrics) *metrics = TokenMetrics{sums.computed, sums.entropy_sum, sums.top1};
    return loss;
  }

 private:
  cuda::PendingLossRows rows_;
  bool read_ = false;
};
}  // namespace

double CudaOpsImpl::cross_entropy_fwd_bwd(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                                          float grad_scale, const Tensor& dhidden, const Tensor& dweight,
                                          int64_t chunk_tokens, int64_t* valid_tokens, TokenMetrics* metrics,
                                          const int32_t* host_targets, float logit_softcap,
                                          const TokenLoss& token_loss) {
  return cross_entropy_deferred(hidden, weight, targets, grad_scale, dhidden, dweight, chunk_tokens, valid_tokens,
                                metrics != nullptr, host_targets, logit_softcap, token_loss)
      ->wait(metrics);
}

std::unique_ptr<PendingLoss> CudaOpsImpl::cross_entropy_deferred(const Tensor& hidden, const Tensor& weight,
                                                                 const Tensor& targets, float grad_scale,
                                                                 const Tensor& dhidden, const Tensor& dweight,
                                                                 int64_t chunk_tokens, int64_t* valid_tokens,
                                                                 bool want_metrics, const int32_t* host_targets,
                                                                 float logit_softcap, const TokenLoss& token_loss) {
  TRLHPC_ASSERT(weight.rank() == 2, "cross_entropy_fwd_bwd: weight must be (V, C)");
  TRLHPC_ASSERT(hidden.dtype() == weight.dtype(), "cross_entropy_fwd_bwd: hidden and weight must share a dtype");
  expect_dtype(targets, DType::I32, "cross_entropy_fwd_bwd targets");
  const int64_t N = targets.numel(), V = weight.dim(0), C = weight.dim(1);
  expect_numel(hidden, N * C, "cross_entropy_fwd_bwd hidden");
  for (const Tensor* t : {&hidden, &weight, &targets}) expect_cuda(*t, "cross_entropy_fwd_bwd");
  const bool backward = dhidden.data() != nullptr;
  if (backward) {
    expect_numel(dhidden, N * C, "cross_entropy_fwd_bwd dhidden");
    expect_cuda(dhidden, "cross_entropy_fwd_bwd dhidden");
    if (dweight.data()) {
      expect_dtype(dweight, DType::F32, "cross_entropy_fwd_bwd dweight");
      expect_numel(dweight, V * C, "cross_entropy_fwd_bwd dweight");
      expect_cuda(dweight, "cross_entropy_fwd_bwd dweight");
    }
  }
  const auto timing = timed("cross_entropy");
  cuda::PendingLossRows rows;
  with_float_type(hidden.dtype(), "cross_entropy_fwd_bwd hidden", [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_float_type(backward ? dhidden.dtype() : DType::F32, "cross_entropy_fwd_bwd dhidden", [&](auto d_tag) {
      using TD = typename decltype(d_tag)::type;
      rows = cuda::cross_entropy_launch(data_of<T>(hidden), data_of<T>(weight), data_of<int32_t>(targets), N, C, V,
                                        grad_scale, backward ? data_of<TD>(dhidden) : nullptr,
                                        backward && dweight.data() ? data_of<float>(dweight) : nullptr, chunk_tokens,
                                        valid_tokens, *matmul_, *allocator_, stream(), want_metrics, host_targets,
                                        logit_softcap, token_loss);
    });
  });
  return std::make_unique<CudaPendingLoss>(std::move(rows));
}

namespace {

// logits (M, Vl) F32; targets (M) I32; row_max (M) F32; sums (M, 2) F32.
void check_vocab_parallel(const Tensor& logits, const Tensor* targets, const Tensor& row_max, const Tensor* sums,
                          const char* op) {
  TRLHPC_ASSERT(logits.rank() == 2, std::string(op) + ": logits must be (M, V)");
  expect_dtype(logits, DType::F32, op);
  expect_cuda(logits, op);
  expect_numel(row_max, logits.dim(0), op);
  expect_dtype(row_max, DType::F32, op);
  expect_cuda(row_max, op);
  if (targets) expect_numel(*targets, logits.dim(0), op), expect_dtype(*targets, DType::I32, op), expect_cuda(*targets, op);
  if (sums) expect_numel(*sums, 2 * logits.dim(0), op), expect_dtype(*sums, DType::F32, op), expect_cuda(*sums, op);
}

}  // namespace

void CudaOpsImpl::vocab_parallel_ce_max(const Tensor& logits, const Tensor& row_max) {
  check_vocab_parallel(logits, nullptr, row_max, nullptr, "vocab_parallel_ce_max");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_max(data_of<float>(logits), logits.dim(0), logits.dim(1), data_of<float>(row_max), stream());
}

void CudaOpsImpl::vocab_parallel_ce_sums(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                         const Tensor& row_max, const Tensor& sums) {
  check_vocab_parallel(logits, &targets, row_max, &sums, "vocab_parallel_ce_sums");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_sums(data_of<float>(logits), data_of<int32_t>(targets), logits.dim(0), logits.dim(1),
                               vocab_start, data_of<float>(row_max), data_of<float>(sums), stream());
}

bool CudaOpsImpl::vocab_parallel_ce_metrics(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                            int64_t vocab_size, const Tensor& row_max, const Tensor& stats) {
  check_vocab_parallel(logits, &targets, row_max, &stats, "vocab_parallel_ce_metrics");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_metrics(data_of<float>(logits), data_of<int32_t>(targets), logits.dim(0), logits.dim(1),
                                  vocab_start, vocab_size, data_of<float>(row_max), data_of<float>(stats), stream());
  return true;
}

void CudaOpsImpl::vocab_parallel_ce_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                         const Tensor& row_max, const Tensor& sums, float grad_scale,
                                         float logit_softcap) {
  check_vocab_parallel(logits, &targets, row_max, &sums, "vocab_parallel_ce_grad");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_grad(data_of<float>(logits), data_of<int32_t>(targets), logits.dim(0), logits.dim(1),
                               vocab_start, data_of<float>(row_max), data_of<float>(sums), grad_scale, stream(),
                               logit_softcap);
}

void CudaOpsImpl::vocab_parallel_ce_logit_sums(const Tensor& logits, const Tensor& targets, const Tensor& logit_sums) {
  // logit_sums (M) F32 has row_max's shape: checked as that argument.
  check_vocab_parallel(logits, &targets, logit_sums, nullptr, "vocab_parallel_ce_logit_sums");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_logit_sums(data_of<float>(logits), data_of<int32_t>(targets), logits.dim(0), logits.dim(1),
                                     data_of<float>(logit_sums), stream());
}

void CudaOpsImpl::vocab_parallel_ce_shaped_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                                int64_t vocab_size, const Tensor& row_max, const Tensor& sums,
                                                float grad_scale, float logit_softcap, const TokenLoss& token_loss) {
  check_vocab_parallel(logits, &targets, row_max, &sums, "vocab_parallel_ce_shaped_grad");
  const auto timing = timed("vocab_parallel_ce");
  cuda::vocab_parallel_ce_shaped_grad(data_of<float>(logits), data_of<int32_t>(targets), logits.dim(0), logits.dim(1),
                                      vocab_start, vocab_size, data_of<float>(row_max), data_of<float>(sums),
                                      grad_scale, logit_softcap, token_loss, stream());
}

void CudaOpsImpl::logit_softcap(const Tensor& logits, float cap) {
  expect_dtype(logits, DType::F32, "logit_softcap");
  expect_cuda(logits, "logit_softcap");
  TRLHPC_ASSERT(cap > 0.0f && std::isfinite(cap), "logit_softcap: cap " + std::to_string(cap) + " must be positive");
  const auto timing = timed("logit_softcap");
  cuda::logit_softcap(data_of<float>(logits), logits.numel(), cap, stream());
}

}  // namespace trlhpc::cuda_backend
