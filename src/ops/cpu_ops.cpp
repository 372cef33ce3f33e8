// The CPU implementation of Ops: checks shapes/dtypes, then calls the kernels in kernels/cpu.
// BF16 activations (--bf16): RMSNorm, RoPE, attention and SwiGLU/GeGLU have kernels that read and write
// bf16 in place (computing in fp32 registers); every other op, and any dtype mix those kernels do not
// take, reaches the fp32 kernels through Fp32Window (src/ops/fp32_window.hpp). Both give the same bits.
#include <cstring>

#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"
#include "src/ops/fp32_window.hpp"

namespace trlhpc {
namespace {

const int32_t* ids_of(const Tensor& t) { return t.i32(); }

using W = Fp32Window;

bool all_of_dtype(DType dtype, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->dtype() != dtype) return false;
  return true;
}
bool all_bf16(std::initializer_list<const Tensor*> tensors) { return all_of_dtype(DType::BF16, tensors); }
bool all_f32(std::initializer_list<const Tensor*> tensors) { return all_of_dtype(DType::F32, tensors); }
const uint16_t* bf16_in(const Tensor& t) { return t.ptr<const uint16_t>(); }
uint16_t* bf16_out(const Tensor& t) { return t.ptr<uint16_t>(); }

class CpuOps final : public Ops {
 public:
  explicit CpuOps(DType compute_dtype) : compute_dtype_(compute_dtype) {
    TRLHPC_REQUIRE(compute_dtype == DType::F32 || compute_dtype == DType::BF16,
                   std::string("CPU backend: compute dtype must be F32 or BF16, got ") + dtype_name(compute_dtype));
  }
  Device device() const override { return Device::CPU; }
  DType compute_dtype() const override { return compute_dtype_; }

  void cast(const Tensor& dst, const Tensor& src) override {
    TRLHPC_ASSERT(dst.numel() == src.numel(), "cast of " + shape_string(src.shape()) + " into " + shape_string(dst.shape()));
    if (dst.dtype() == src.dtype()) return copy(dst, src);
    TRLHPC_ASSERT((dst.dtype() == DType::F32 && src.dtype() == DType::BF16) ||
                      (dst.dtype() == DType::BF16 && src.dtype() == DType::F32),
                  std::string("cast: unsupported ") + dtype_name(src.dtype()) + " -> " + dtype_name(dst.dtype()));
    if (src.dtype() == DType::BF16)
      cpu::cast_bf16_to_f32(dst.f32(), src.ptr<const uint16_t>(), src.numel());
    else
      cpu::cast_f32_to_bf16(dst.ptr<uint16_t>(), src.f32(), src.numel());
  }

  Tensor allocate(const Shape& shape, DType dtype) override {
    size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    size_t rounded = (bytes + 63) / 64 * 64;
    void* memory = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    if (rounded && !memory)
      throw RuntimeFailure(rank_prefix() + "out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::shared_ptr<void> storage(memory, [](void* p) { std::free(p); });
    return Tensor(std::move(storage), memory, dtype, Device::CPU, shape);
  }
  Tensor zeros(const Shape& shape, DType dtype) override {
    Tensor t = allocate(shape, dtype);
    fill_zero(t);
    return t;
  }
  void fill_zero(const Tensor& t) override {
    if (t.nbytes()) std::memset(t.data(), 0, t.nbytes());
  }
  void copy(const Tensor& dst, const Tensor& src) override {
    TRLHPC_ASSERT(dst.nbytes() == src.nbytes(), "copy of " + shape_string(src.shape()) + " into " + shape_string(dst.shape()));
    if (dst.nbytes()) std::memcpy(dst.data(), src.data(), dst.nbytes());
  }
  void copy_from_host(const Tensor& dst, const void* host, size_t bytes) override {
    TRLHPC_ASSERT(bytes <= dst.nbytes(), "copy_from_host overflows the tensor");
    if (bytes) std::memcpy(dst.data(), host, bytes);
  }
  void copy_to_host(void* host, const Tensor& src, size_t bytes) override {
    TRLHPC_ASSERT(bytes <= src.nbytes(), "copy_to_host reads past the tensor");
    if (bytes) std::memcpy(host, src.data(), bytes);
  }

  void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, float alpha,
              float beta) override {
    TRLHPC_ASSERT(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, "matmul takes 2-D tensors");
    const int64_t M = trans_a ? a.dim(1) : a.dim(0), K = trans_a ? a.dim(0) : a.dim(1);
    const int64_t Kb = trans_b ? b.dim(1) : b.dim(0), N = trans_b ? b.dim(0) : b.dim(1);
    TRLHPC_ASSERT(K == Kb && c.dim(0) == M && c.dim(1) == N,
                  "matmul shapes " + shape_string(a.shape()) + (trans_a ? "^T" : "") + " x " +
                      shape_string(b.shape()) + (trans_b ? "^T" : "") + " -> " + shape_string(c.shape()));
    // Any bf16 operand makes it the mixed-precision GEMM (fp32 operands are rounded to bf16 as they are
    // packed, so fp32 master weights are passed as they are); all-fp32 stays the exact fp32 GEMM.
    const auto is_bf16 = [](const Tensor& t) {
      TRLHPC_ASSERT(t.dtype() == DType::F32 || t.dtype() == DType::BF16, "matmul takes F32 or BF16 tensors");
      return t.dtype() == DType::BF16;
    };
    const bool a16 = is_bf16(a), b16 = is_bf16(b), c16 = is_bf16(c);
    // Under a BF16 compute dtype every GEMM is the bf16 one, as under torch.autocast, also where both
    // operands are F32 (the residual stream's gradient against a master weight, for instance).
    if (!a16 && !b16 && !c16 && compute_dtype_ == DType::F32) {
      cpu::matmul(a.f32(), trans_a, b.f32(), trans_b, c.f32(), M, N, K, alpha, beta);
      return;
    }
    cpu::matmul_bf16({a.data(), a16}, trans_a, {b.data(), b16}, trans_b, {c.data(), c16}, M, N, K, alpha, beta);
  }
  void bias_add(const Tensor& y, const Tensor& bias) override {
    W yw(y, W::InOut), bw(bias, W::In);
    cpu::bias_add(yw.get(), bw.get(), y.numel() / bias.numel(), bias.numel());
  }
  void bias_bwd(const Tensor& dy, const Tensor& dbias) override {
    W dyw(dy, W::In);
    cpu::bias_bwd(dyw.get(), dbias.f32(), dy.numel() / dbias.numel(), dbias.numel());
  }
  void add_inplace(const Tensor& y, const Tensor& x) override {
    TRLHPC_ASSERT(y.numel() == x.numel(), "add_inplace size mismatch");
    W yw(y, W::InOut), xw(x, W::In);
    cpu::add_inplace(yw.get(), xw.get(), y.numel());
  }
  void scale_inplace(const Tensor& y, float s) override { cpu::scale_inplace(y.f32(), s, y.numel()); }
  double sum_of_squares(const Tensor& x) override { return cpu::sum_of_squares(x.f32(), x.numel()); }

  void embedding_fwd(const Tensor& ids, const Tensor& table, const Tensor& out, int64_t vocab_start) override {
    W outw(out, W::Out);
    cpu::embedding_fwd(ids_of(ids), table.f32(), outw.get(), ids.numel(), table.dim(1), table.dim(0), vocab_start);
  }
  void embedding_bwd(const Tensor& ids, const Tensor& dout, const Tensor& dtable, int64_t vocab_start) override {
    W doutw(dout, W::In);
    cpu::embedding_bwd(ids_of(ids), doutw.get(), dtable.f32(), ids.numel(), dtable.dim(1), dtable.dim(0), vocab_start);
  }
  void rmsnorm_fwd(const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd, float eps) override {
    // The weight (C) goes through a window either way (bf16-rounded norm weights under --bf16): it is
    // the (N, C) activations that the bf16 kernels keep from being copied.
    const int64_t C = weight.numel(), N = x.numel() / C;
    W ww(weight, W::In);
    if (x.dtype() == DType::F32 && y.dtype() == DType::BF16)  // the residual stream into a GEMM input
      return cpu::rmsnorm_fwd(x.f32(), ww.get(), bf16_out(y), rstd.f32(), N, C, eps);
    if (all_bf16({&x, &y}))  // q/k norms
      return cpu::rmsnorm_fwd(bf16_in(x), ww.get(), bf16_out(y), rstd.f32(), N, C, eps);
    W xw(x, W::In), yw(y, W::Out);
    cpu::rmsnorm_fwd(xw.get(), ww.get(), yw.get(), rstd.f32(), N, C, eps);
  }
  void rmsnorm_bwd(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                   const Tensor& dweight) override {
    const int64_t C = weight.numel(), N = x.numel() / C;
    W ww(weight, W::In);
    if (x.dtype() == DType::BF16 && all_f32({&dy, &dx}))  // q/k norms: their input is bf16
      return cpu::rmsnorm_bwd(bf16_in(x), ww.get(), rstd.f32(), dy.f32(), dx.f32(), dweight.f32(), N, C);
    W xw(x, W::In), dyw(dy, W::In), dxw(dx, W::Out);
    cpu::rmsnorm_bwd(xw.get(), ww.get(), rstd.f32(), dyw.get(), dxw.get(), dweight.f32(), N, C);
  }
  void rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq) override {
    const int64_t HS = inv_freq.numel() * 2, N = pos.numel();
    if (x.dtype() == DType::BF16)
      return cpu::rope_fwd(bf16_out(x), ids_of(pos), inv_freq.f32(), N, x.numel() / (N * HS), HS);
    W xw(x, W::InOut);
    cpu::rope_fwd(xw.get(), ids_of(pos), inv_freq.f32(), N, x.numel() / (N * HS), HS);
  }
  void rope_bwd(const Tensor& dx, const Tensor& pos, const Tensor& inv_freq) override {
    const int64_t HS = inv_freq.numel() * 2, N = pos.numel();
    if (dx.dtype() == DType::BF16)
      return cpu::rope_bwd(bf16_out(dx), ids_of(pos), inv_freq.f32(), N, dx.numel() / (N * HS), HS);
    W dxw(dx, W::InOut);
    cpu::rope_bwd(dxw.get(), ids_of(pos), inv_freq.f32(), N, dx.numel() / (N * HS), HS);
  }
  void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& k_pos,
                     const Tensor& q_doc, const Tensor& k_doc, const Tensor& o, const Tensor& lse,
                     const AttentionShape& s) override {
    if (all_bf16({&q, &k, &v}) && (o.dtype() == DType::BF16 || o.dtype() == DType::F32)) {
      const auto call = [&](auto* out) {
        cpu::attention_fwd(bf16_in(q), bf16_in(k), bf16_in(v), ids_of(q_pos), ids_of(k_pos), ids_of(q_doc),
                           ids_of(k_doc), out, lse.f32(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, s.scale, s.window,
                           s.softcap);
      };
      return o.dtype() == DType::BF16 ? call(bf16_out(o)) : call(o.f32());
    }
    W qw(q, W::In), kw(k, W::In), vw(v, W::In), ow(o, W::Out);
    cpu::attention_fwd(qw.get(), kw.get(), vw.get(), ids_of(q_pos), ids_of(k_pos), ids_of(q_doc), ids_of(k_doc),
                       ow.get(), lse.f32(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, s.scale, s.window, s.softcap);
  }
  void attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                     const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                     const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const AttentionShape& s) override {
    if (all_bf16({&q, &k, &v, &o, &dout}) && all_f32({&dq, &dk, &dv}))  // the decoder's --bf16 backward
      return cpu::attention_bwd(bf16_in(q), bf16_in(k), bf16_in(v), bf16_in(o), lse.f32(), bf16_in(dout),
                                ids_of(q_pos), ids_of(k_pos), ids_of(q_doc), ids_of(k_doc), dq.f32(), dk.f32(),
                                dv.f32(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, s.scale, s.window, s.softcap);
    W qw(q, W::In), kw(k, W::In), vw(v, W::In), ow(o, W::In), doutw(dout, W::In);
    W dqw(dq, W::InOut), dkw(dk, W::InOut), dvw(dv, W::InOut);
    cpu::attention_bwd(qw.get(), kw.get(), vw.get(), ow.get(), lse.f32(), doutw.get(), ids_of(q_pos), ids_of(k_pos),
                       ids_of(q_doc), ids_of(k_doc), dqw.get(), dkw.get(), dvw.get(), s.B, s.Tq, s.Tk, s.NH, s.KVH,
                       s.HS, s.scale, s.window, s.softcap);
  }
  void attention_merge(const Tensor& o_acc, const Tensor& lse_acc, const Tensor& o_blk, const Tensor& lse_blk,
                       const AttentionShape& s) override {
    W accw(o_acc, W::InOut), blkw(o_blk, W::In);
    cpu::attention_merge(accw.get(), lse_acc.f32(), blkw.get(), lse_blk.f32(), s.B, s.Tq, s.NH, s.HS);
  }
  void lora_dropout(const Tensor& x, const Tensor& out, const Tensor& source_rows, const Tensor& source_columns,
                    int64_t feature_offset, float p, uint64_t key) override {
    TRLHPC_ASSERT(x.rank() == 2 && out.numel() == x.numel() && source_rows.numel() == x.dim(0) &&
                      source_columns.numel() == x.dim(0),
                  "lora_dropout shapes");
    if (x.data() == out.data()) {
      W xw(x, W::InOut);
      cpu::lora_dropout(xw.get(), xw.get(), source_rows.ptr<const int32_t>(), source_columns.ptr<const int32_t>(),
                        x.dim(0), x.dim(1), feature_offset, p, key);
      return;
    }
    W xw(x, W::In), ow(out, W::Out);
    cpu::lora_dropout(xw.get(), ow.get(), source_rows.ptr<const int32_t>(), source_columns.ptr<const int32_t>(),
                      x.dim(0), x.dim(1), feature_offset, p, key);
  }
  void embedding_noise(const Tensor& x, const Tensor& source_rows, const Tensor& source_columns, float magnitude,
                       uint64_t key) override {
    TRLHPC_ASSERT(x.rank() == 2 && source_rows.numel() == x.dim(0) && source_columns.numel() == x.dim(0),
                  "embedding_noise shapes");
    W xw(x, W::InOut);
    cpu::embedding_noise(xw.get(), source_rows.ptr<const int32_t>(), source_columns.ptr<const int32_t>(), x.dim(0),
                         x.dim(1), magnitude, key);
  }
  void swiglu_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    if (all_bf16({&gate, &up, &out})) {
      cpu::swiglu_fwd_bf16(gate.ptr<const uint16_t>(), up.ptr<const uint16_t>(), out.ptr<uint16_t>(), gate.numel());
      return;
    }
    W gw(gate, W::In), uw(up, W::In), ow(out, W::Out);
    cpu::swiglu_fwd(gw.get(), uw.get(), ow.get(), gate.numel());
  }
  void swiglu_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                  const Tensor& dup) override {
    if (all_bf16({&gate, &up, &dout, &dgate, &dup})) {
      cpu::swiglu_bwd_bf16(gate.ptr<const uint16_t>(), up.ptr<const uint16_t>(), dout.ptr<const uint16_t>(),
                           dgate.ptr<uint16_t>(), dup.ptr<uint16_t>(), gate.numel());
      return;
    }
    W gw(gate, W::In), uw(up, W::In), dw(dout, W::In), dgw(dgate, W::Out), duw(dup, W::Out);
    cpu::swiglu_bwd(gw.get(), uw.get(), dw.get(), dgw.get(), duw.get(), gate.numel());
  }
  void geglu_tanh_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    if (all_bf16({&gate, &up, &out})) {
      cpu::geglu_tanh_fwd_bf16(gate.ptr<const uint16_t>(), up.ptr<const uint16_t>(), out.ptr<uint16_t>(), gate.numel());
      return;
    }
    W gw(gate, W::In), uw(up, W::In), ow(out, W::Out);
    cpu::geglu_tanh_fwd(gw.get(), uw.get(), ow.get(), gate.numel());
  }
  void geglu_tanh_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                  const Tensor& dup) override {
    if (all_bf16({&gate, &up, &dout, &dgate, &dup})) {
      cpu::geglu_tanh_bwd_bf16(gate.ptr<const uint16_t>(), up.ptr<const uint16_t>(), dout.ptr<const uint16_t>(),
                           dgate.ptr<uint16_t>(), dup.ptr<uint16_t>(), gate.numel());
      return;
    }
    W gw(gate, W::In), uw(up, W::In), dw(dout, W::In), dgw(dgate, W::Out), duw(dup, W::Out);
    cpu::geglu_tanh_bwd(gw.get(), uw.get(), dw.get(), dgw.get(), duw.get(), gate.numel());
  }
  void vocab_parallel_ce_max(const Tensor& logits, const Tensor& row_max) override {
    cpu::vocab_parallel_ce_max(logits.f32(), logits.dim(0), logits.dim(1), row_max.f32());
  }
  void vocab_parallel_ce_sums(const Tensor& logits, const Tensor& targets, int64_t vocab_start, const Tensor& row_max,
                              const Tensor& sums) override {
    cpu::vocab_parallel_ce_sums(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), vocab_start, row_max.f32(),
                                sums.f32());
  }
  bool vocab_parallel_ce_metrics(const Tensor& logits, const Tensor& targets, int64_t vocab_start, int64_t vocab_size,
                                 const Tensor& row_max, const Tensor& stats) override {
    cpu::vocab_parallel_ce_metrics(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), vocab_start, vocab_size,
                                   row_max.f32(), stats.f32());
    return true;
  }
  void vocab_parallel_ce_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start, const Tensor& row_max,
                              const Tensor& sums, float grad_scale, float logit_softcap = 0.0f) override {
    cpu::vocab_parallel_ce_grad(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), vocab_start, row_max.f32(),
                                sums.f32(), grad_scale, logit_softcap);
  }
  void vocab_parallel_ce_logit_sums(const Tensor& logits, const Tensor& targets, const Tensor& logit_sums) override {
    cpu::vocab_parallel_ce_logit_sums(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), logit_sums.f32());
  }
  void vocab_parallel_ce_shaped_grad(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                     int64_t vocab_size, const Tensor& row_max, const Tensor& sums, float grad_scale,
                                     float logit_softcap, const TokenLoss& token_loss) override {
    cpu::vocab_parallel_ce_shaped_grad(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), vocab_start,
                                       vocab_size, row_max.f32(), sums.f32(), grad_scale, logit_softcap, token_loss);
  }
  void logit_softcap(const Tensor& logits, float cap) override {
    cpu::logit_softcap(logits.f32(), logits.numel(), cap);
  }
  double cross_entropy_fwd_bwd(const Tensor& hidden, const Tensor& weight, const Tensor& targets, float grad_scale,
                               const Tensor& dhidden, const Tensor& dweight, int64_t chunk_tokens,
                               int64_t* valid_tokens, TokenMetrics* metrics = nullptr,
                               const int32_t* /*host_targets: `targets` is host memory already*/ = nullptr,
                               float logit_softcap = 0.0f, const TokenLoss& token_loss = {}) override {
    const bool backward = dhidden.data() != nullptr;
    cpu::CrossEntropyMetrics m;
    W hw(hidden, W::In);
    std::unique_ptr<W> dhw = backward ? std::make_unique<W>(dhidden, W::Out) : nullptr;
    TRLHPC_ASSERT(weight.dtype() == DType::F32 || weight.dtype() == DType::BF16, "cross_entropy_fwd_bwd: F32 or BF16 weight");
    const cpu::GemmOperand w{weight.data(), weight.dtype() == DType::BF16};
    const double loss = cpu::cross_entropy_fwd_bwd(hw.get(), w, ids_of(targets), targets.numel(),
                                                   weight.dim(1), weight.dim(0), grad_scale,
                                                   backward ? dhw->get() : nullptr, backward ? dweight.f32() : nullptr,
                                                   chunk_tokens, valid_tokens, metrics ? &m : nullptr,
                                                   compute_dtype_ == DType::BF16, logit_softcap, token_loss);
    if (metrics) *metrics = TokenMetrics{true, m.entropy_sum, m.top1};
    return loss;
  }
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  const Tensor& compute) override {
    uint16_t* copy = nullptr;
    if (compute.data()) {
      TRLHPC_ASSERT(compute.dtype() == DType::BF16 && compute.numel() == param.numel(),
                    "adamw_step: the compute copy must be BF16 of the parameters' numel");
      copy = compute.ptr<uint16_t>();
    }
    cpu::adamw_step(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), h.lr, h.beta1, h.beta2, h.eps,
                    h.weight_decay, h.step, copy);
  }

 private:
  DType compute_dtype_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops(DType compute_dtype) { return std::make_unique<CpuOps>(compute_dtype); }

}  // namespace trlhpc
