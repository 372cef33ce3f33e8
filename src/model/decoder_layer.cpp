// One decoder layer, forward and backward (pre-norm attention block + pre-norm SwiGLU MLP).
//
// Backward, with dx = dL/d(x_out) on entry and dL/d(x_in) on exit:
//   MLP     x_out = x_mid + act Wd^T (+bd), act = silu(gate) * up, gate/up = h2 Wg^T, h2 Wu^T
//           dWd += dx^T act; dact = dx Wd; (dgate, dup) = swiglu'; dWg += dgate^T h2; dWu += dup^T h2
//           dh2 = dgate Wg + dup Wu;  dx += rmsnorm'(x_mid; dh2)
//   attn    x_mid = x_in + attn Wo^T (+bo)
//           dWo += dx^T attn; dattn = dx Wo; (dq, dk, dv) = attention'; un-rotate dq, dk
//           qk_norm (Qwen3): q = rope(rmsnorm_head(q_pre)), so dq <- rmsnorm_head'(q_pre; dq) (same for k)
//           dWq += dq^T h1 (same for k, v); dh1 = dq Wq + dk Wk + dv Wv;  dx += rmsnorm'(x_in; dh1)
//
// Gemma (sandwich_norms): the o_proj and down_proj outputs (+ bias) pass through their own RMSNorm
// before the residual add (x_mid = x_in + norm_attn_out(attn Wo^T), x_out = x_mid + norm_mlp_out(..)),
// so their backward first runs that norm's backward on dx into dbranch, which then plays dx's role
// for the o/down GEMMs and biases. Every Gemma norm scales by (1 + w) (Decoder::norm_scale). The MLP
// activation is swiglu or Gemma's GeGLU with the tanh GELU (mlp_activation).
//
// Tensor parallel (Megatron-LM, Shoeybi et al. 2019, sec. 3): the weights are this rank's slices and
// the shapes use the local NH/tp, KVH/tp, F/tp (local_). q/k/v and gate/up are column-parallel: their
// input goes through the f operator (identity forward, all-reduce of dh1 / dh2 backward). o_proj and
// down_proj are row-parallel: the g operator all-reduces their partial outputs in forward (identity
// backward: dx is already whole on every rank); their biases are replicated and added once, after it.
// tp > KVH: each rank holds one kv head shared by tp/KVH ranks; its local query heads all use it. The
// rank's dk/dv are partial (its query heads only): the k/v weight/bias grads are summed over the
// sharing sub-group; dh1 = dq Wq + dk Wk + dv Wv summed over all tp ranks is still the whole gradient.
// The q/k norm weights are replicated; each rank norms its own heads, so their gradients are partial
// over tp and summed over it (all of tp, also when tp > KVH: each rank's dk covers its query heads).
// Tp sequence parallel (decoder.hpp): x_in, h1, x_mid, h2 and dx hold this rank's N/tp rows; the
// column-parallel inputs are all-gathered (gather_tokens), the row-parallel outputs and the f-operator
// gradients reduce-scattered (reduce_tokens), and the norm weights' row-partial gradients summed.
#include <cmath>
#include <string>

#include "src/model/decoder_internal.hpp"

namespace trlhpc {

LayerTensors layer_tensors(const ParameterStore& store, const ModelConfig& c, int layer, StoreView view) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  auto get = [&](const std::string& name) {
    return view == StoreView::Grads     ? store.grad(p + name)
           : view == StoreView::Compute ? store.compute_param(p + name)
                                        : store.param(p + name);
  };
  LayerTensors t;
  t.ln1 = get("input_layernorm.weight");
  t.wq = get("self_attn.q_proj.weight");
  t.wk = get("self_attn.k_proj.weight");
  t.wv = get("self_attn.v_proj.weight");
  t.wo = get("self_attn.o_proj.weight");
  if (c.qkv_bias) {
    t.bq = get("self_attn.q_proj.bias");
    t.bk = get("self_attn.k_proj.bias");
    t.bv = get("self_attn.v_proj.bias");
  }
  if (c.o_bias) t.bo = get("self_attn.o_proj.bias");
  if (c.qk_norm) {
    t.qn = get("self_attn.q_norm.weight");
    t.kn = get("self_attn.k_norm.weight");
  }
  if (c.sandwich_norms) {
    t.ln_attn_out = get("post_attention_layernorm.weight");
    t.ln2 = get("pre_feedforward_layernorm.weight");
    t.ln_mlp_out = get("post_feedforward_layernorm.weight");
  } else {
    t.ln2 = get("post_attention_layernorm.weight");
  }
  t.wg = get("mlp.gate_proj.weight");
  t.wu = get("mlp.up_proj.weight");
  t.wd = get("mlp.down_proj.weight");
  if (c.mlp_bias) {
    t.bg = get("mlp.gate_proj.bias");
    t.bu = get("mlp.up_proj.bias");
    t.bd = get("mlp.down_proj.bias");
  }
  return t;
}

// y = x W^T (+ b)
void linear(Ops& ops, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, float beta) {
  ops.matmul(x, false, w, true, y, 1.0f, beta);
  if (b.data()) ops.bias_add(y, b);
}

namespace {

AttentionShape attention_shape(const ModelConfig& c, const DeviceBatch& batch, int layer) {
  AttentionShape s;
  s.window = c.attention_window(layer);  // 0 on full-attention layers
  s.B = batch.B;
  s.Tq = s.Tk = batch.T;
  s.NH = c.num_attention_heads;
  s.KVH = c.num_key_value_heads;
  s.HS = c.head_dim;
  s.scale = c.attention_scale();  // head_dim^-0.5, or Gemma's query_pre_attn_scalar^-0.5
  s.softcap = c.attention_softcap();  // Gemma 2's attn_logit_softcapping; 0 = none
  return s;
}

// dW += dy^T x, db += colsum(dy)
// (no-ops for the empty tensors of a frozen base)
void linear_weight_grad(Ops& ops, const Tensor& dy, const Tensor& x, const Tensor& dw, const Tensor& db) {
  if (dw.data()) ops.matmul(dy, true, x, false, dw, 1.0f, 1.0f);
  if (db.data()) ops.bias_bwd(dy, db);
}

}  // namespace

void allocate_layer_activations(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl,
                                Decoder::LayerActivations& a) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, QD = c.num_attention_heads * c.head_dim,
                KD = c.num_key_value_heads * c.head_dim;
  const DType cd = compute;  // the GEMM inputs; statistics and the residual stream stay F32
  a.h1 = source.allocate({Nl, C}, cd);
  a.rstd1 = source.allocate({Nl});
  a.q = source.allocate({N, QD}, cd);
  a.k = source.allocate({N, KD}, cd);
  a.v = source.allocate({N, KD}, cd);
  a.attn = source.allocate({N, QD}, cd);
  a.lse = source.allocate({N * c.num_attention_heads});
  if (c.qk_norm) {  // the norm inputs are GEMM outputs stored like q/k; their statistics F32
    a.q_pre = source.allocate({N, QD}, cd);
    a.k_pre = source.allocate({N, KD}, cd);
    a.q_rstd = source.allocate({N * c.num_attention_heads});
    a.k_rstd = source.allocate({N * c.num_key_value_heads});
  }
  a.x_mid = source.allocate({Nl, C});
  if (c.sandwich_norms) {  // the residual branches before their norms: F32 like the residual stream
    a.attn_out = source.allocate({Nl, C});
    a.rstd_attn_out = source.allocate({Nl});
    a.mlp_out = source.allocate({Nl, C});
    a.rstd_mlp_out = source.allocate({Nl});
  }
  a.h2 = source.allocate({Nl, C}, cd);
  a.rstd2 = source.allocate({Nl});
  a.gate = source.allocate({N, F}, cd);
  a.up = source.allocate({N, F}, cd);
  a.act = source.allocate({N, F}, cd);
}

void Decoder::Scratch::allocate(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl,
                                bool checkpointing) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, QD = c.num_attention_heads * c.head_dim,
                KD = c.num_key_value_heads * c.head_dim;
  const bool sharded = Nl < N;
  const DType cd = compute;
  const bool mixed = cd != DType::F32;
  x_final = source.allocate({Nl, C});
  h_final = source.allocate({N, C}, cd);
  h_final_local = sharded ? source.allocate({Nl, C}, cd) : h_final;
  rstd_final = source.allocate({Nl});
  dx = source.allocate({Nl, C});
  dx_compute = mixed ? source.allocate({Nl, C}, cd) : dx;
  dh = source.allocate({N, C});
  dh_local = sharded ? source.allocate({Nl, C}) : dh;
  dtmp = source.allocate({Nl, C});
  dbranch = c.sandwich_norms ? source.allocate({Nl, C}) : Tensor();
  // Never live at the same time (each is consumed before the next gather or row-parallel product);
  // the gathered GEMM inputs are in the compute dtype, the partial sums F32.
  row_out = sharded ? source.allocate({N, C}) : Tensor();
  h_full = dx_full = sharded ? (mixed ? source.allocate({N, C}, cd) : row_out) : Tensor();
  dq = source.allocate({N, QD});  // F32: attention_bwd accumulates into them (ring attention: per K/V block)
  dk = source.allocate({N, KD});
  dv = source.allocate({N, KD});
  dq_pre = c.qk_norm ? source.allocate({N, QD}) : Tensor();
  dk_pre = c.qk_norm ? source.allocate({N, KD}) : Tensor();
  dattn = source.allocate({N, QD}, cd);
  dact = source.allocate({N, F}, cd);
  dgate = source.allocate({N, F}, cd);
  dup = source.allocate({N, F}, cd);
  recompute = LayerActivations();
  x_recompute_out = Tensor();
  if (checkpointing) {
    allocate_layer_activations(source, compute, c, N, Nl, recompute);
    x_recompute_out = source.allocate({Nl, C});
  }
}

void allocate_decoder_buffers(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl,
                              bool checkpointing, std::vector<Decoder::LayerActivations>& acts, Decoder::Scratch& scratch) {
  for (Decoder::LayerActivations& act : acts) {
    act = Decoder::LayerActivations();
    act.x_in = source.allocate({Nl, c.hidden_size});
    if (!checkpointing) allocate_layer_activations(source, compute, c, N, Nl, act);
  }
  scratch.allocate(source, compute, c, N, Nl, checkpointing);
}

Tensor Decoder::compute_param(const Tensor& p) {
  // A view into a compute copy is bf16(master) already; an fp32 master without one (LoRA adapters, a
  // store nobody refreshes) is rounded here.
  if (ops_.compute_dtype() == DType::F32 || !p.data() || p.dtype() == ops_.compute_dtype()) return p;
  Tensor rounded = ops_.allocate(p.shape(), ops_.compute_dtype());
  ops_.cast(rounded, p);
  return rounded;
}

LayerTensors Decoder::compute_params(LayerTensors w) {
  // Views into the compute copies are bf16 already. Without one, the weight matrices go to GEMMs, which
  // round fp32 operands as they pack, and norms and biases are rounded here.
  for (Tensor* t : {&w.ln1, &w.ln2, &w.qn, &w.kn, &w.ln_attn_out, &w.ln_mlp_out, &w.bq, &w.bk, &w.bv, &w.bo, &w.bg,
                    &w.bu, &w.bd})
    *t = compute_param(*t);
  return norm_scales(w);
}

LayerTensors Decoder::norm_scales(LayerTensors w) {
  int slot = 0;
  for (Tensor* t : {&w.ln1, &w.ln2, &w.qn, &w.kn, &w.ln_attn_out, &w.ln_mlp_out}) *t = norm_scale(*t, slot++);
  return w;
}

Tensor Decoder::compute_copy(const Tensor& dx) {
  Scratch& s = *scratch_;
  if (ops_.compute_dtype() == DType::F32) return dx;  // fp32 compute: the gradient itself
  ops_.cast(s.dx_compute, dx);
  return s.dx_compute;
}

void Decoder::layer_forward(int layer, const DeviceBatch& batch, const Tensor& x_in, LayerActivations& a,
                            const Tensor& x_out) {
  const ModelConfig& c = local_;
  const int64_t N = batch.B * batch.T;
  const LayerTensors w = compute_params(layer_tensors(params_, c, layer, StoreView::Compute));
  const float eps = static_cast<float>(c.rms_norm_eps);
  Scratch& s = *scratch_;

  ops_.rmsnorm_fwd(x_in, w.ln1, a.h1, a.rstd1, eps);
  const Tensor h1 = gather_tokens(a.h1, s.h_full);  // (N, C)
  linear(ops_, h1, w.wq, w.bq, c.qk_norm ? a.q_pre : a.q);
  linear(ops_, h1, w.wk, w.bk, c.qk_norm ? a.k_pre : a.k);
  linear(ops_, h1, w.wv, w.bv, a.v);
  lora_forward(layer, LoraModule::Q, batch, h1, a.lora_h[0], c.qk_norm ? a.q_pre : a.q);
  lora_forward(layer, LoraModule::K, batch, h1, a.lora_h[1], c.qk_norm ? a.k_pre : a.k);
  lora_forward(layer, LoraModule::V, batch, h1, a.lora_h[2], a.v);
  if (c.qk_norm) {  // Qwen3: RMSNorm over each head's HS values (rows of N*heads), before RoPE
    ops_.rmsnorm_fwd(a.q_pre, w.qn, a.q, a.q_rstd, eps);
    ops_.rmsnorm_fwd(a.k_pre, w.kn, a.k, a.k_rstd, eps);
  }
  if (c.layer_uses_rope(layer)) {  // SmolLM3's no-RoPE layers attend with q, k as projected
    ops_.rope_fwd(a.q.reshape({N, c.num_attention_heads, c.head_dim}), batch.positions, rope_frequencies(layer));
    ops_.rope_fwd(a.k.reshape({N, c.num_key_value_heads, c.head_dim}), batch.positions, rope_frequencies(layer));
  }
  attention().forward(ops_, a.q, a.k, a.v, batch.positions, batch.doc_ids, a.attn, a.lse,
                      attention_shape(c, batch, layer));
  // Row-parallel o_proj: partial sum over this rank's heads -> g (sum over tp) -> residual, bias once.
  const Tensor o_out = c.sandwich_norms ? a.attn_out : a.x_mid;  // (Nl, C)
  const Tensor o_partial = tp_sp_ ? s.row_out : o_out;           // (N, C)
  ops_.matmul(a.attn, false, w.wo, true, o_partial);
  lora_forward(layer, LoraModule::O, batch, a.attn, a.lora_h[3], o_partial);
  reduce_tokens(o_partial, o_out);
  if (c.sandwich_norms) {  // Gemma: x_mid = x_in + norm(o_proj(attn) + bo)
    if (w.bo.data()) ops_.bias_add(a.attn_out, w.bo);
    ops_.rmsnorm_fwd(a.attn_out, w.ln_attn_out, a.x_mid, a.rstd_attn_out, eps);
    ops_.add_inplace(a.x_mid, x_in);
  } else {
    ops_.add_inplace(a.x_mid, x_in);
    if (w.bo.data()) ops_.bias_add(a.x_mid, w.bo);
  }

  ops_.rmsnorm_fwd(a.x_mid, w.ln2, a.h2, a.rstd2, eps);
  const Tensor h2 = gather_tokens(a.h2, s.h_full);  // (N, C)
  linear(ops_, h2, w.wg, w.bg, a.gate);
  linear(ops_, h2, w.wu, w.bu, a.up);
  lora_forward(layer, LoraModule::Gate, batch, h2, a.lora_h[4], a.gate);
  lora_forward(layer, LoraModule::Up, batch, h2, a.lora_h[5], a.up);
  if (c.mlp_activation == MlpActivation::GeluTanh) ops_.geglu_tanh_fwd(a.gate, a.up, a.act);
  else ops_.swiglu_fwd(a.gate, a.up, a.act);
  // Row-parallel down_proj: partial sum over this rank's F-slice -> g (sum over tp) -> residual, bias once.
  const Tensor d_out = c.sandwich_norms ? a.mlp_out : x_out;  // (Nl, C)
  const Tensor d_partial = tp_sp_ ? s.row_out : d_out;        // (N, C)
  ops_.matmul(a.act, false, w.wd, true, d_partial);
  lora_forward(layer, LoraModule::Down, batch, a.act, a.lora_h[6], d_partial);
  reduce_tokens(d_partial, d_out);
  if (c.sandwich_norms) {  // Gemma: x_out = x_mid + norm(down_proj(act) + bd)
    if (w.bd.data()) ops_.bias_add(a.mlp_out, w.bd);
    ops_.rmsnorm_fwd(a.mlp_out, w.ln_mlp_out, x_out, a.rstd_mlp_out, eps);
    ops_.add_inplace(x_out, a.x_mid);
  } else {
    ops_.add_inplace(x_out, a.x_mid);
    if (w.bd.data()) ops_.bias_add(x_out, w.bd);
  }
}

void Decoder::layer_backward(int layer, const DeviceBatch& batch, const LayerActivations& a, const Tensor& dx) {
  const ModelConfig& c = local_;
  const int64_t N = batch.B * batch.T;
  const LayerTensors w = compute_params(layer_tensors(params_, c, layer, StoreView::Compute));
  // A frozen base (LoRA) computes no gradient of its own: empty targets.
  const LayerTensors g = lora_store_ ? LayerTensors{} : layer_tensors(params_, c, layer, StoreView::Grads);
  Scratch& s = *scratch_;
  const Tensor dln1 = norm_grad_target(g.ln1, 0), dln2 = norm_grad_target(g.ln2, 1);
  const Tensor dln_attn_out = norm_grad_target(g.ln_attn_out, 2), dln_mlp_out = norm_grad_target(g.ln_mlp_out, 3);
  // The gradient w.r.t. a residual branch's output before its norm: dx itself without sandwich norms.
  auto branch_grad = [&](const Tensor& out, const Tensor& weight, const Tensor& rstd, const Tensor& dweight) {
    if (!c.sandwich_norms) return dx;
    ops_.rmsnorm_bwd(out, weight, rstd, dx, s.dbranch, dweight);
    return s.dbranch;
  };

  // MLP block. dxf: the residual gradient of all N tokens in the compute dtype (whole on every rank
  // without sequence parallel; all-gathered with it), so the down_proj bias gradient is whole too.
  Tensor dxf = gather_tokens(compute_copy(branch_grad(a.mlp_out, w.ln_mlp_out, a.rstd_mlp_out, dln_mlp_out)),
                             s.dx_full);  // (N, C)
  linear_weight_grad(ops_, dxf, a.act, g.wd, g.bd);
  ops_.matmul(dxf, false, w.wd, false, s.dact);
  lora_backward(layer, LoraModule::Down, batch, a.act, a.lora_h[6], dxf, s.dact);
  if (c.mlp_activation == MlpActivation::GeluTanh) ops_.geglu_tanh_bwd(a.gate, a.up, s.dact, s.dgate, s.dup);
  else ops_.swiglu_bwd(a.gate, a.up, s.dact, s.dgate, s.dup);
  const Tensor h2 = gather_tokens(a.h2, s.h_full);  // (N, C)
  linear_weight_grad(ops_, s.dgate, h2, g.wg, g.bg);
  linear_weight_grad(ops_, s.dup, h2, g.wu, g.bu);
  ops_.matmul(s.dgate, false, w.wg, false, s.dh);
  ops_.matmul(s.dup, false, w.wu, false, s.dh, 1.0f, 1.0f);
  lora_backward(layer, LoraModule::Gate, batch, h2, a.lora_h[4], s.dgate, s.dh);
  lora_backward(layer, LoraModule::Up, batch, h2, a.lora_h[5], s.dup, s.dh);
  reduce_tokens(s.dh, s.dh_local);  // f operator of the column-parallel gate/up: sum the F-slices' input grads
  ops_.rmsnorm_bwd(a.x_mid, w.ln2, a.rstd2, s.dh_local, s.dtmp, dln2);
  ops_.add_inplace(dx, s.dtmp);

  // Attention block.
  dxf = gather_tokens(compute_copy(branch_grad(a.attn_out, w.ln_attn_out, a.rstd_attn_out, dln_attn_out)),
                      s.dx_full);  // (N, C)
  linear_weight_grad(ops_, dxf, a.attn, g.wo, g.bo);
  ops_.matmul(dxf, false, w.wo, false, s.dattn);
  lora_backward(layer, LoraModule::O, batch, a.attn, a.lora_h[3], dxf, s.dattn);
  attention().backward(ops_, a.q, a.k, a.v, a.attn, a.lse, s.dattn, batch.positions, batch.doc_ids, s.dq, s.dk, s.dv,
                       attention_shape(c, batch, layer));
  if (c.layer_uses_rope(layer)) {
    ops_.rope_bwd(s.dq.reshape({N, c.num_attention_heads, c.head_dim}), batch.positions, rope_frequencies(layer));
    ops_.rope_bwd(s.dk.reshape({N, c.num_key_value_heads, c.head_dim}), batch.positions, rope_frequencies(layer));
  }
  Tensor dq = s.dq, dk = s.dk;  // gradients w.r.t. the q/k_proj outputs
  if (c.qk_norm) {
    ops_.rmsnorm_bwd(a.q_pre, w.qn, a.q_rstd, s.dq, s.dq_pre, head_norm_grad_target(g.qn, 0));
    ops_.rmsnorm_bwd(a.k_pre, w.kn, a.k_rstd, s.dk, s.dk_pre, head_norm_grad_target(g.kn, 1));
    finish_head_norm_grads({g.qn, g.kn});
    dq = s.dq_pre;
    dk = s.dk_pre;
  }
  const Tensor h1 = gather_tokens(a.h1, s.h_full);  // (N, C)
  linear_weight_grad(ops_, dq, h1, g.wq, g.bq);
  if (kv_comm_ && g.wk.data()) {
    // tp > KVH: this rank's dk/dv are the shared kv head's gradient from its own query heads only.
    // Sum this micro-batch's k/v weight grads over the ranks sharing the head, then accumulate (the
    // store's grads may already hold earlier micro-batches' summed grads), before after_backward.
    const int64_t KD = c.num_key_value_heads * c.head_dim, C = c.hidden_size;
    ops_.fill_zero(kv_grad_);
    const Tensor dwk = kv_grad_.view({KD, C}, 0), dbk = kv_grad_.view({KD}, KD * C),
                 dwv = kv_grad_.view({KD, C}, KD * C + KD), dbv = kv_grad_.view({KD}, 2 * KD * C + KD);
    linear_weight_grad(ops_, dk, h1, dwk, g.bk.data() ? dbk : Tensor());
    linear_weight_grad(ops_, s.dv, h1, dwv, g.bv.data() ? dbv : Tensor());
    kv_all_reduce_sum(kv_grad_);
    ops_.add_inplace(g.wk, dwk);
    ops_.add_inplace(g.wv, dwv);
    if (g.bk.data()) ops_.add_inplace(g.bk, dbk);
    if (g.bv.data()) ops_.add_inplace(g.bv, dbv);
  } else {
    linear_weight_grad(ops_, dk, h1, g.wk, g.bk);
    linear_weight_grad(ops_, s.dv, h1, g.wv, g.bv);
  }
  ops_.matmul(dq, false, w.wq, false, s.dh);
  ops_.matmul(dk, false, w.wk, false, s.dh, 1.0f, 1.0f);
  ops_.matmul(s.dv, false, w.wv, false, s.dh, 1.0f, 1.0f);
  lora_backward(layer, LoraModule::Q, batch, h1, a.lora_h[0], dq, s.dh);
  lora_backward(layer, LoraModule::K, batch, h1, a.lora_h[1], dk, s.dh);
  lora_backward(layer, LoraModule::V, batch, h1, a.lora_h[2], s.dv, s.dh);
  reduce_tokens(s.dh, s.dh_local);  // f operator of the column-parallel q/k/v: sum the heads' input grads
  ops_.rmsnorm_bwd(acts_[static_cast<size_t>(layer)].x_in, w.ln1, a.rstd1, s.dh_local, s.dtmp, dln1);
  ops_.add_inplace(dx, s.dtmp);
  if (c.sandwich_norms) finish_norm_grads({g.ln1, g.ln2, g.ln_attn_out, g.ln_mlp_out});
  else finish_norm_grads({g.ln1, g.ln2});
  if (lora_store_) finish_lora_grads();
}

}  // namespace trlhpc
