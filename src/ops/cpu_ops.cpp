// The CPU implementation of Ops: checks shapes/dtypes, then calls the kernels in kernels/cpu.
#include <cstring>

#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {

const int32_t* ids_of(const Tensor& t) { return t.i32(); }

class CpuOps final : public Ops {
 public:
  Device device() const override { return Device::CPU; }

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
    if (!a16 && !b16 && !c16) {
      cpu::matmul(a.f32(), trans_a, b.f32(), trans_b, c.f32(), M, N, K, alpha, beta);
      return;
    }
    cpu::matmul_bf16({a.data(), a16}, trans_a, {b.data(), b16}, trans_b, {c.data(), c16}, M, N, K, alpha, beta);
  }
  void bias_add(const Tensor& y, const Tensor& bias) override {
    cpu::bias_add(y.f32(), bias.f32(), y.numel() / bias.numel(), bias.numel());
  }
  void bias_bwd(const Tensor& dy, const Tensor& dbias) override {
    cpu::bias_bwd(dy.f32(), dbias.f32(), dy.numel() / dbias.numel(), dbias.numel());
  }
  void add_inplace(const Tensor& y, const Tensor& x) override {
    TRLHPC_ASSERT(y.numel() == x.numel(), "add_inplace size mismatch");
    cpu::add_inplace(y.f32(), x.f32(), y.numel());
  }
  void scale_inplace(const Tensor& y, float s) override { cpu::scale_inplace(y.f32(), s, y.numel()); }
  double sum_of_squares(const Tensor& x) override { return cpu::sum_of_squares(x.f32(), x.numel()); }

  void embedding_fwd(const Tensor& ids, const Tensor& table, const Tensor& out, int64_t vocab_start) override {
    cpu::embedding_fwd(ids_of(ids), table.f32(), out.f32(), ids.numel(), table.dim(1), table.dim(0), vocab_start);
  }
  void embedding_bwd(const Tensor& ids, const Tensor& dout, const Tensor& dtable, int64_t vocab_start) override {
    cpu::embedding_bwd(ids_of(ids), dout.f32(), dtable.f32(), ids.numel(), dtable.dim(1), dtable.dim(0), vocab_start);
  }
  void rmsnorm_fwd(const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd, float eps) override {
    cpu::rmsnorm_fwd(x.f32(), weight.f32(), y.f32(), rstd.f32(), x.numel() / weight.numel(), weight.numel(), eps);
  }
  void rmsnorm_bwd(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                   const Tensor& dweight) override {
    cpu::rmsnorm_bwd(x.f32(), weight.f32(), rstd.f32(), dy.f32(), dx.f32(), dweight.f32(), x.numel() / weight.numel(),
                     weight.numel());
  }
  void rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq) override {
    const int64_t HS = inv_freq.numel() * 2, N = pos.numel();
    cpu::rope_fwd(x.f32(), ids_of(pos), inv_freq.f32(), N, x.numel() / (N * HS), HS);
  }
  void rope_bwd(const Tensor& dx, const Tensor& pos, const Tensor& inv_freq) override {
    const int64_t HS = inv_freq.numel() * 2, N = pos.numel();
    cpu::rope_bwd(dx.f32(), ids_of(pos), inv_freq.f32(), N, dx.numel() / (N * HS), HS);
  }
  void attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& k_pos,
                     const Tensor& q_doc, const Tensor& k_doc, const Tensor& o, const Tensor& lse,
                     const AttentionShape& s) override {
    cpu::attention_fwd(q.f32(), k.f32(), v.f32(), ids_of(q_pos), ids_of(k_pos), ids_of(q_doc), ids_of(k_doc), o.f32(),
                       lse.f32(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, s.scale);
  }
  void attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                     const Tensor& dout, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                     const Tensor& k_doc, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const AttentionShape& s) override {
    cpu::attention_bwd(q.f32(), k.f32(), v.f32(), o.f32(), lse.f32(), dout.f32(), ids_of(q_pos), ids_of(k_pos),
                       ids_of(q_doc), ids_of(k_doc), dq.f32(), dk.f32(), dv.f32(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS,
                       s.scale);
  }
  void attention_merge(const Tensor& o_acc, const Tensor& lse_acc, const Tensor& o_blk, const Tensor& lse_blk,
                       const AttentionShape& s) override {
    cpu::attention_merge(o_acc.f32(), lse_acc.f32(), o_blk.f32(), lse_blk.f32(), s.B, s.Tq, s.NH, s.HS);
  }
  void swiglu_fwd(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    cpu::swiglu_fwd(gate.f32(), up.f32(), out.f32(), gate.numel());
  }
  void swiglu_bwd(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                  const Tensor& dup) override {
    cpu::swiglu_bwd(gate.f32(), up.f32(), dout.f32(), dgate.f32(), dup.f32(), gate.numel());
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
                              const Tensor& sums, float grad_scale) override {
    cpu::vocab_parallel_ce_grad(logits.f32(), ids_of(targets), logits.dim(0), logits.dim(1), vocab_start, row_max.f32(),
                                sums.f32(), grad_scale);
  }
  double cross_entropy_fwd_bwd(const Tensor& hidden, const Tensor& weight, const Tensor& targets, float grad_scale,
                               const Tensor& dhidden, const Tensor& dweight, int64_t chunk_tokens,
                               int64_t* valid_tokens, TokenMetrics* metrics = nullptr) override {
    const bool backward = dhidden.data() != nullptr;
    cpu::CrossEntropyMetrics m;
    const double loss = cpu::cross_entropy_fwd_bwd(hidden.f32(), weight.f32(), ids_of(targets), targets.numel(),
                                                   weight.dim(1), weight.dim(0), grad_scale,
                                                   backward ? dhidden.f32() : nullptr, backward ? dweight.f32() : nullptr,
                                                   chunk_tokens, valid_tokens, metrics ? &m : nullptr);
    if (metrics) *metrics = TokenMetrics{true, m.entropy_sum, m.top1};
    return loss;
  }
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWHyper& h) override {
    cpu::adamw_step(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), h.lr, h.beta1, h.beta2, h.eps,
                    h.weight_decay, h.step);
  }
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() { return std::make_unique<CpuOps>(); }

}  // namespace trlhpc
