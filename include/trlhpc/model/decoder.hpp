#pragma once
// Decoder: the Qwen2/Llama causal LM with hand-written forward and backward over the Ops seam.
//
//   x = embed(ids)                                                        (N, C)
//   per layer:  x = x + o_proj(attn(rope(q), rope(k), v))  with q,k,v = proj(rmsnorm(x))
//               x = x + down(silu(gate(h)) * up(h))        with h = rmsnorm(x)
//   loss_sum = sum over targets != -100 of CE(lm_head(rmsnorm(x)), target)
//
// forward_backward() runs the forward, the fused LM-head cross-entropy with its gradient scaled by
// `grad_scale` (1 / target tokens of the whole global batch, CONTRACT.md), and the backward, adding
// every parameter's gradient into the ParameterStore's gradient buffers (+=, so micro-batches
// accumulate). With gradient checkpointing only each layer's input is kept and the layer is
// recomputed during backward.
//
// UnitHooks let a sharding strategy act around each parameter unit (gather before use, free after,
// reduce gradients as soon as a unit's backward is done) without the model knowing about it.
#include <cstdint>
#include <memory>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) {}
  virtual void after_forward(int unit) {}
  virtual void before_backward(int unit) {}
  virtual void after_backward(int unit) {}
};

// A Batch copied to the backend's device.
struct DeviceBatch {
  int64_t B = 0, T = 0;
  Tensor input_ids;  // (N) I32
  Tensor targets;    // (N) I32
  Tensor positions;  // (N) I32
  Tensor doc_ids;    // (N) I32
  static DeviceBatch upload(const Batch& batch, Ops& ops);
};

struct LossResult {
  double loss_sum = 0;        // summed CE over valid targets of this micro-batch
  int64_t target_tokens = 0;  // valid targets of this micro-batch
};

class Decoder {
 public:
  Decoder(ModelConfig config, Ops& ops, ParameterStore& params, bool gradient_checkpointing = false,
          int64_t loss_chunk_tokens = 1024);
  ~Decoder();

  const ModelConfig& config() const { return config_; }
  void set_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Context/sequence parallel attention; null = LocalAttention. Not owned.
  void set_sequence_attention(SequenceAttention* attention) { attention_ = attention; }

  // Forward + loss + backward; gradients accumulate into the store.
  LossResult forward_backward(const DeviceBatch& batch, float grad_scale);
  // Forward + loss only (evaluation).
  LossResult forward_loss(const DeviceBatch& batch);
  // Forward to the final hidden states (N, C) and the logits of the given rows (for tests/export);
  // logits is (N, V), only sensible for small inputs.
  Tensor logits(const DeviceBatch& batch);

 public:
  struct LayerActivations;  // defined in src/model/decoder_internal.hpp
  struct Scratch;

 private:

  LossResult run(const DeviceBatch& batch, float grad_scale, bool backward);
  void layer_forward(int layer, const DeviceBatch& batch, const Tensor& x_in, LayerActivations& act,
                     const Tensor& x_out);
  void layer_backward(int layer, const DeviceBatch& batch, const LayerActivations& act, const Tensor& dx);
  void forward_to_final_hidden(const DeviceBatch& batch, bool keep_for_backward);
  void ensure_buffers(int64_t N);
  Tensor head_weight() const;
  Tensor head_grad() const;
  UnitHooks& hooks() { return hooks_ ? *hooks_ : no_hooks_; }
  SequenceAttention& attention() { return attention_ ? *attention_ : local_attention_; }

  ModelConfig config_;
  Ops& ops_;
  ParameterStore& params_;
  bool checkpointing_;
  int64_t loss_chunk_tokens_;
  UnitHooks* hooks_ = nullptr;
  UnitHooks no_hooks_;
  SequenceAttention* attention_ = nullptr;
  LocalAttention local_attention_;
  Tensor inv_freq_;  // (HS/2)
  std::vector<LayerActivations> acts_;
  std::unique_ptr<Scratch> scratch_;
  int64_t buffers_N_ = -1;
};

}  // namespace trlhpc
