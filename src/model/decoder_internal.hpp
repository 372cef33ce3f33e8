#pragma once
// Buffers private to the decoder implementation (decoder.cpp, decoder_layer.cpp).
#include "trlhpc/model/decoder.hpp"

namespace trlhpc {

// What one layer keeps from its forward for its backward. Shapes for N tokens.
struct Decoder::LayerActivations {
  Tensor x_in;   // (N, C) layer input (always kept, also under checkpointing)
  Tensor h1;     // (N, C) input_layernorm output
  Tensor rstd1;  // (N)
  Tensor q;      // (N, NH*HS) after RoPE
  Tensor k;      // (N, KVH*HS) after RoPE
  Tensor v;      // (N, KVH*HS)
  Tensor attn;   // (N, NH*HS) attention output
  Tensor lse;    // (B, NH, T)
  Tensor x_mid;  // (N, C) residual after attention
  Tensor h2;     // (N, C) post_attention_layernorm output
  Tensor rstd2;  // (N)
  Tensor gate;   // (N, F)
  Tensor up;     // (N, F)
  Tensor act;    // (N, F) silu(gate) * up
};

// Work buffers shared by all layers.
struct Decoder::Scratch {
  Tensor x_final;          // (N, C) output of the last layer
  Tensor h_final;          // (N, C) final norm output
  Tensor rstd_final;       // (N)
  Tensor dx;               // (N, C) gradient flowing down the residual stream
  Tensor dh;               // (N, C) gradient w.r.t. a norm output
  Tensor dtmp;             // (N, C)
  Tensor dq, dk, dv;       // (N, NH*HS), (N, KVH*HS), (N, KVH*HS)
  Tensor dattn;            // (N, NH*HS)
  Tensor dact, dgate, dup; // (N, F)
  LayerActivations recompute;  // checkpointing: the layer being recomputed
  Tensor x_recompute_out;      // (N, C) checkpointing: output of the recomputed layer (unused)

  void allocate(Ops& ops, const ModelConfig& c, int64_t N, bool checkpointing);
};

// Allocates every LayerActivations buffer but x_in.
void allocate_layer_activations(Ops& ops, const ModelConfig& c, int64_t N, Decoder::LayerActivations& act);

}  // namespace trlhpc
