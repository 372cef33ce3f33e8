#pragma once
// Buffers private to the decoder implementation (decoder.cpp, decoder_layer.cpp).
#include <array>
#include <vector>

#include "trlhpc/model/decoder.hpp"

namespace trlhpc {

// Where the decoder's buffers come from: the backend (Ops::allocate) when training, a byte counter
// when planning memory (Decoder::planned_activation_bytes). One allocation routine serves both, so the
// memory plan cannot drift from what a step allocates.
class BufferSource {
 public:
  virtual ~BufferSource() = default;
  virtual Tensor allocate(const Shape& shape, DType dtype = DType::F32) = 0;
};

// What one layer keeps from its forward for its backward. Shapes for N tokens, of which this rank
// holds Nl outside the tp regions (Nl = N/tp under tp sequence parallel, else N).
struct Decoder::LayerActivations {
  Tensor x_in;   // (Nl, C) layer input (always kept, also under checkpointing)
  Tensor h1;     // (Nl, C) input_layernorm output
  Tensor rstd1;  // (Nl)
  Tensor q;      // (N, NH*HS) after RoPE
  Tensor k;      // (N, KVH*HS) after RoPE
  Tensor q_pre;  // qk_norm: (N, NH*HS) q_proj output, the q_norm input (empty otherwise)
  Tensor k_pre;  // qk_norm: (N, KVH*HS) k_proj output, the k_norm input
  Tensor q_rstd; // qk_norm: (N*NH) per-head rstd of q_norm
  Tensor k_rstd; // qk_norm: (N*KVH) per-head rstd of k_norm
  Tensor v;      // (N, KVH*HS)
  Tensor attn;   // (N, NH*HS) attention output
  Tensor lse;    // (B, NH, T)
  Tensor attn_out;       // sandwich_norms: (Nl, C) F32 o_proj output (+ bias), the post-attention norm's input
  Tensor rstd_attn_out;  // sandwich_norms: (Nl)
  Tensor x_mid;  // (Nl, C) residual after attention
  Tensor h2;     // (Nl, C) post_attention_layernorm output
  Tensor rstd2;  // (Nl)
  Tensor gate;   // (N, F)
  Tensor up;     // (N, F)
  Tensor act;    // (N, F) silu(gate) * up (GeGLU: gelu_tanh(gate) * up)
  Tensor mlp_out;        // sandwich_norms: (Nl, C) F32 down_proj output (+ bias), the post-MLP norm's input
  Tensor rstd_mlp_out;   // sandwich_norms: (Nl)
  // LoRA: x A^T (N, r) of each module (compute dtype); empty without adapters.
  std::array<Tensor, kLoraModuleCount> lora_h;
};

// Work buffers shared by all layers. Under tp sequence parallel the *_local / (Nl, C) buffers hold this
// rank's rows and the (N, C) ones the gathered or partial whole; otherwise each alias pair is one tensor.
// Dtypes: the GEMM inputs (h_*, dattn, dact, dgate, dup, dx_compute) are in Ops::compute_dtype(), the
// rest F32 (docs/ARCHITECTURE.md "Mixed precision").
struct Decoder::Scratch {
  Tensor x_final;          // (Nl, C) output of the last layer
  Tensor h_final_local;    // (Nl, C) final norm output (= h_final without tp sequence parallel)
  Tensor h_final;          // (N, C) final norm output of every token (the LM head's input)
  Tensor rstd_final;       // (Nl)
  Tensor dx;               // (Nl, C) gradient flowing down the residual stream
  Tensor dx_compute;       // (Nl, C) dx cast to the compute dtype for the o/down backward GEMMs (= dx in fp32)
  Tensor dh;               // (N, C) gradient w.r.t. a norm output (partial over tp before reduction)
  Tensor dh_local;         // (Nl, C) its reduced rows (= dh without tp sequence parallel)
  Tensor dtmp;             // (Nl, C)
  Tensor dbranch;          // sandwich_norms: (Nl, C) F32 gradient w.r.t. the o_proj / down_proj output
  // Tp sequence parallel: three names for one (N, C) buffer, each use consumed before the next begins
  // (two buffers under a BF16 compute dtype: h_full = dx_full in it, row_out F32).
  Tensor h_full;           // (N, C) all-gathered norm output (q/k/v, gate/up inputs; their weight grads)
  Tensor dx_full;          // (N, C) all-gathered dx_compute (o/down weight grads and input grads)
  Tensor row_out;          // (N, C) partial row-parallel / embedding output before its reduce-scatter;
                           //        the all-gathered F32 dx for the embedding backward
  Tensor dq, dk, dv;       // (N, NH*HS), (N, KVH*HS), (N, KVH*HS)
  Tensor dq_pre, dk_pre;   // qk_norm: (N, NH*HS), (N, KVH*HS) F32 gradients w.r.t. the q/k_proj outputs
  Tensor dattn;            // (N, NH*HS)
  Tensor dact, dgate, dup; // (N, F)
  LayerActivations recompute;  // checkpointing: the layer being recomputed
  Tensor x_recompute_out;      // (Nl, C) checkpointing: output of the recomputed layer (unused)

  // Nl < N: tp sequence parallel (the alias pairs become distinct tensors). `compute`: Ops::compute_dtype().
  void allocate(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl, bool checkpointing);
};

// One layer's parameters in the store, as `view` says: the fp32 masters, the compute copies where the
// store has them (ParameterStore::compute_param; the masters otherwise), or the gradients. Biases and
// the q/k norms (qn, kn) are empty Tensors when the architecture has none. Shapes are the tp-local ones of `c`.
// ln1 is the attention's input norm and ln2 the MLP's (post_attention_layernorm, or Gemma's
// pre_feedforward_layernorm); with sandwich_norms ln_attn_out (Gemma's post_attention_layernorm) and
// ln_mlp_out (post_feedforward_layernorm) normalise the attention and MLP outputs.
struct LayerTensors {
  Tensor ln1, wq, bq, wk, bk, wv, bv, wo, bo, qn, kn, ln_attn_out, ln2, wg, bg, wu, bu, wd, bd, ln_mlp_out;
};
enum class StoreView { Params, Compute, Grads };
LayerTensors layer_tensors(const ParameterStore& store, const ModelConfig& c, int layer, StoreView view);

// y = x W^T (+ b), with beta scaling what y held.
void linear(Ops& ops, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, float beta = 0.0f);

// Allocates every LayerActivations buffer but x_in (and the LoRA ones).
void allocate_layer_activations(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl,
                                Decoder::LayerActivations& act);

// Every base-model buffer of a step over N tokens (Nl outside the tp regions) of the tp-local config `c`:
// each layer's x_in, the other saved activations of every layer (of none under checkpointing, where
// scratch.recompute holds the layer being recomputed) and the scratch. The LoRA buffers are the
// decoder's own (decoder_lora.cpp).
void allocate_decoder_buffers(BufferSource& source, DType compute, const ModelConfig& c, int64_t N, int64_t Nl,
                              bool checkpointing, std::vector<Decoder::LayerActivations>& acts, Decoder::Scratch& scratch);

}  // namespace trlhpc
