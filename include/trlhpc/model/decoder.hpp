#pragma once
// Decoder: the Qwen2/Qwen3/Llama/Mistral/SmolLM3/Gemma 3 causal LM with hand-written forward and backward
// over the Ops seam (Gemma's extra norms, (1 + w) scaling, GeGLU and embedding scale: decoder_layer.cpp).
//
//   x = embed(ids)                                                        (N, C)
//   per layer:  x = x + o_proj(attn(rope(q), rope(k), v))  with q,k,v = proj(rmsnorm(x))
//               (Qwen3: q, k = per-head rmsnorm(proj(rmsnorm(x))) before RoPE)
//               x = x + down(silu(gate(h)) * up(h))        with h = rmsnorm(x)
//   loss_sum = sum over targets != -100 of CE(lm_head(rmsnorm(x)), target)
//
// forward_backward() runs the forward, the fused LM-head cross-entropy with its gradient scaled by
// `grad_scale` (1 / target tokens of the whole global batch, CONTRACT.md), and the backward, adding
// every parameter's gradient into the ParameterStore's gradient buffers (+=, so micro-batches
// accumulate). With gradient checkpointing only each layer's input is kept and the layer is
// recomputed during backward.
//
// Tensor parallel (DecoderParallelism::tp; Megatron-LM, Shoeybi et al. 2019): the store holds this tp
// rank's slices (parameter_names.hpp); the layers run on the local heads / F-slice with Megatron's f
// (all-reduce of the input gradient after q/k/v and gate/up in backward) and g (all-reduce of the
// o_proj / down_proj outputs in forward) operators; the embedding is a partial lookup + all-reduce;
// the loss is the vocab-parallel cross-entropy (never a full-vocabulary logit row on any rank).
//
// Tensor-parallel sequence parallelism (DecoderParallelism::tp_sequence_parallel; Korthikanti et al.
// 2022, "Reducing Activation Recomputation in Large Transformer Models", sec. 4.2.2): between the
// column/row-parallel pairs (embedding output, residual stream, norms, the loss's hidden states) each tp
// rank holds only rows [r*N/tp, (r+1)*N/tp) of the flattened (N = B*T, C) tokens instead of all N.
// The all-reduce of g becomes a reduce-scatter into this rank's rows (forward) with an all-gather of
// the gradient (backward); f becomes an all-gather of the norm output (forward, again in backward for
// the weight gradients, as Megatron-LM does instead of keeping it) with a reduce-scatter of its
// gradient. The norm weights' gradients then come from this rank's rows only and are summed over tp
// before the unit's after_backward hook. Same volume as the all-reduces; the residual-stream and norm
// activations shrink by tp. N must divide by tp (ParallelDims::sequence_multiple pads rows for it).
//
// UnitHooks let a sharding strategy act around each parameter unit (gather before use, free after,
// reduce gradients as soon as a unit's backward is done) without the model knowing about it. Order:
//   forward   before/after_forward(0) embedding, then units 1..L, then before_forward(L+1) final norm
//             (+ head); with tied embeddings before_forward(0) again, since the head reads unit 0;
//   training  before_backward(L+1) (and before_backward(0) when tied) just before the loss, because
//             the fused loss writes the head's gradient before the backward walk reaches that unit;
//             after_backward(L+1), then before/after_backward(u) for u = L..1, then for 0. The final
//             unit gets no after_forward in training. Hooks must tolerate the repeated calls.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/kv_cache.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/neftune.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/model/tp_layout.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

class Communicator;
struct LayerTensors;

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) {}
  virtual void after_forward(int unit) {}
  virtual void before_backward(int unit) {}
  virtual void after_backward(int unit) {}
};

// How a Decoder is laid out over the ranks: its parallel wiring, fixed at construction. The default
// is the whole model on this rank. train/parallelize.hpp builds it from the mesh's groups; nothing
// else should assemble one by hand. Every pointer is borrowed and must outlive the Decoder.
struct DecoderParallelism {
  // Tensor-parallel group: size and rank must be the ParameterStore's tp layout. `tp` carries the
  // backend's tensors (ProcessGroup::device()); `tp_host` the same ranks' host-memory values (the
  // vocab-parallel loss's TRL metrics, gathered logits for generation: ProcessGroup::host()). Both null
  // = tp size 1; with tp set, tp_host must be set too.
  Communicator* tp = nullptr;
  Communicator* tp_host = nullptr;
  // tp > num_key_value_heads: each kv head is held by tp/KVH ranks; this is the group of the tp ranks
  // holding this rank's kv head (the mesh's kv_share group, ordered by tp rank). The k/v weight and
  // bias gradients of each layer's backward are summed over it before the unit's after_backward hook
  // (each rank's dk/dv come from its own query heads only). Null (or size 1) otherwise.
  Communicator* kv_share = nullptr;
  // Context/sequence-parallel attention (ring, Ulysses); null = LocalAttention.
  SequenceAttention* attention = nullptr;
  // Shard the tokens outside the tp regions over tp (above); ignored at tp size 1.
  bool tp_sequence_parallel = false;
  // A data-parallel strategy acting around each parameter unit; null = no hooks.
  UnitHooks* hooks = nullptr;
};

// LoRA adapters (lora.hpp) on the decoder: with them the ParameterStore is the frozen base (no
// gradient is computed for it: its gradient buffers may be empty) and `store` the trainable adapters,
// unit l = layer l, laid out for the same tp rank. Every pointer is borrowed and must outlive the
// Decoder; the store's hooks are the caller's (DecoderParallelism::hooks fire for the base's units).
struct DecoderAdapters {
  const LoraConfig* lora = nullptr;  // null: no adapters, the ParameterStore trains
  const LoraTargets* targets = nullptr;
  ParameterStore* store = nullptr;
};

// A Batch copied to the backend's device.
struct DeviceBatch {
  int64_t B = 0, T = 0;
  int64_t collated_T = 0;  // Batch::collated_length(): T before sequence sharding (NEFTune's L)
  Tensor input_ids;  // (N) I32
  Tensor targets;    // (N) I32
  Tensor positions;  // (N) I32
  Tensor doc_ids;    // (N) I32
  Tensor source_rows, source_columns;  // (N) I32: Batch::source_rows / source_columns (-1 when absent)
  // (N) the targets as uploaded, kept on the host: the loss reads them there instead of copying
  // `targets` back, which on a GPU would wait for the whole forward (docs/CUDA-REVIEW-FIXES.md defect 6). Empty
  // for a batch built otherwise (the loss then copies).
  std::vector<int32_t> host_targets;
  static DeviceBatch upload(const Batch& batch, Ops& ops);
};

struct LossResult {
  double loss_sum = 0;        // summed CE over valid targets of this micro-batch
  int64_t target_tokens = 0;  // valid targets of this micro-batch
  TokenMetrics metrics;       // TRL's entropy / top-1 sums over them (computed = false: backend lacks it)
  // Set while loss_sum and metrics are still being computed on the device (forward_backward_deferred);
  // resolve() waits for them and fills the two fields. target_tokens is known at once.
  std::shared_ptr<PendingLoss> pending;
  void resolve() {
    if (!pending) return;
    loss_sum = pending->wait(&metrics);
    pending.reset();
  }
};

class Decoder {
 public:
  // The store holds the tp slices of its tp layout; `parallelism` must match it (checked). token_loss:
  // label smoothing / DFT of the training and evaluation loss (kernels/token_loss.hpp), in the fused loss
  // (tp 1) and the vocab-parallel one alike.
  Decoder(ModelConfig config, Ops& ops, ParameterStore& params, bool gradient_checkpointing = false,
          int64_t loss_chunk_tokens = 1024, DecoderParallelism parallelism = {}, DecoderAdapters adapters = {},
          TokenLoss token_loss = {});
  ~Decoder();

  const ModelConfig& config() const { return config_; }
  TpLayout tp_layout() const { return tp_; }
  bool has_adapters() const { return lora_store_ != nullptr; }
  // LoRA dropout draws a new mask every optimizer step: the step the next forward_backward belongs to.
  // (Evaluation and generation apply no dropout, as PEFT in eval mode.)
  void set_training_step(int64_t step) { training_step_ = static_cast<uint64_t>(step); }
  // NEFTune noise on the input embeddings of training passes (neftune.hpp); alpha 0: none.
  void set_neftune(NeftuneNoise noise) { neftune_ = noise; }
  bool tp_sequence_parallel() const { return tp_sp_; }

  // Forward + loss + backward; gradients accumulate into the store.
  LossResult forward_backward(const DeviceBatch& batch, float grad_scale);
  // The same, returning before the loss sums are read back from the device (LossResult::pending; the
  // trainer resolves every micro-batch's at the step's end: one host synchronisation per step, not one
  // per micro-batch). The gradients are queued as with forward_backward.
  LossResult forward_backward_deferred(const DeviceBatch& batch, float grad_scale);
  // Forward + loss only (evaluation).
  LossResult forward_loss(const DeviceBatch& batch);
  // Forward to the final hidden states (N, C) and the logits of the given rows (for tests/export);
  // logits is (N, V), only sensible for small inputs.
  Tensor logits(const DeviceBatch& batch);
  // Forward to the residual stream after the last layer (before the final norm), (N, C) for every
  // token on every tp rank (gathered under tp sequence parallel): a layer's output, for tests.
  Tensor layer_stack_output(const DeviceBatch& batch);
  // Incremental decoding of one sequence (generation; src/model/decoder_incremental.cpp). A cache for
  // up to `capacity` tokens; then each call runs `ids`, the sequence's next tokens (the whole prompt
  // first, then one token at a time), at positions cache.length.., appends their keys and values and
  // returns the logits (V) of the last one, whole on every tp rank. Collective over tp. Its own
  // buffers: the training path and its numbers are untouched. Not under tp sequence parallel.
  KvCache make_kv_cache(int64_t capacity);
  std::vector<float> forward_incremental(KvCache& cache, std::span<const int32_t> ids);
  // Bytes of the activation and work buffers allocated for the last micro-batch shape (every layer's
  // saved activations plus the shared scratch), for memory reports. Grows linearly with B*T.
  int64_t activation_bytes() const;
  // What activation_bytes() reports after a step of N tokens on this rank (Nl of them outside the tp
  // regions: N/tp under tp sequence parallel, else N) of the tp-local `local_config`: the decoder's own
  // allocation routine run against a byte counter, allocating nothing (parallel/memory_plan.hpp).
  static int64_t planned_activation_bytes(const ModelConfig& local_config, int64_t N, int64_t Nl, bool checkpointing,
                                          DType compute);

 public:
  struct LayerActivations;  // defined in src/model/decoder_internal.hpp
  struct Scratch;

 private:

  LossResult run(const DeviceBatch& batch, float grad_scale, bool backward, bool defer_loss = false);
  void layer_forward(int layer, const DeviceBatch& batch, const Tensor& x_in, LayerActivations& act,
                     const Tensor& x_out);
  void layer_backward(int layer, const DeviceBatch& batch, const LayerActivations& act, const Tensor& dx);
  // dx (Nl, C) in the compute dtype: dx itself in fp32, else cast into the scratch dx_compute.
  Tensor compute_copy(const Tensor& dx);
  // A parameter as the layers compute with it: the master itself in fp32; under a BF16 compute dtype
  // bf16(master) (every parameter is used so, as under FSDP's bf16 param_dtype, so a ZeRO-3 unit
  // all-gathered in bf16 gives the same numbers as the fp32 master of a DDP rank): a view into the
  // store's compute copy is returned as it is, an fp32 tensor is rounded into a new one.
  Tensor compute_param(const Tensor& p);
  LayerTensors compute_params(LayerTensors w);  // norms and biases through compute_param, then norm_scales
  // The factor a norm multiplies by: the weight itself, or for Gemma's (1 + w) norms
  // (norm_weight_offset) 1 + w in F32, written into slot `slot` of norm_scaled_ (0..5 a layer's norms,
  // 6 the final norm). The weight's gradient is the factor's.
  Tensor norm_scale(const Tensor& weight, int slot);
  LayerTensors norm_scales(LayerTensors w);
  // RoPE inverse frequencies of `layer`: Gemma's sliding layers rotate with their own base.
  const Tensor& rope_frequencies(int64_t layer) const;
  // Gemma (scale_embeddings): the embedding rows (Nl, C) times sqrt(C) as transformers computes it.
  void scale_embedding_rows(const Tensor& rows);
  void add_neftune_noise(const DeviceBatch& batch, const Tensor& rows);
  // The ids the embedding backward scatters by: the batch's, or with embedding_padding_idx a copy in
  // which pad_token_id is -1 (outside every vocabulary slice, so no row takes its gradient).
  Tensor embedding_grad_ids(const DeviceBatch& batch);
  void forward_to_final_hidden(const DeviceBatch& batch);
  // The tensor-parallel part of construction: this rank's share of the model and the buffers tp needs.
  void init_tensor_parallel(const DecoderParallelism& parallelism);
  void ensure_buffers(int64_t N);
  // The head's weight: a modules_to_save copy ("lm_head.weight" in the adapters), else the base's
  // lm_head, or its embedding when tied; its compute copy (bf16) where the store has one.
  std::string head_name() const;
  Tensor head_weight() const;
  // The LM-head loss of s.h_final (and its backward into s.dh and the head gradient when `backward`):
  // the fused kernel when the vocabulary is whole, the vocab-parallel one when it is split.
  // defer_loss: the fused kernel's sums may stay pending (LossResult::pending); the vocab-parallel path
  // reads them on the host as it goes and never defers.
  LossResult head_loss(const DeviceBatch& batch, float grad_scale, bool backward, bool defer_loss = false);
  LossResult vocab_parallel_loss(const DeviceBatch& batch, float grad_scale, bool backward);
  // Sum (or max) of `t` over the tp group, in place; a no-op without a tp communicator.
  void tp_all_reduce_sum(const Tensor& t);
  void tp_all_reduce_max(const Tensor& t);
  // Sum of `t` over the kv-sharing sub-group, in place (tp > KVH only).
  void kv_all_reduce_sum(const Tensor& t);
  // Tokens this rank holds outside the tp regions: N / tp under tp sequence parallel, else N.
  int64_t local_tokens(int64_t N) const;
  // Input of a column-parallel block: all N rows. Under tp sequence parallel the all-gather of this
  // rank's rows `local` (N/tp, C) into `full` (N, C), returned; otherwise `local` itself (already whole).
  Tensor gather_tokens(const Tensor& local, const Tensor& full);
  // Output of a row-parallel block: `partial` (N, C) summed over tp into this rank's rows `out`
  // (reduce-scatter, (N/tp, C)); without sequence parallel `partial` is `out` and is all-reduced in place.
  void reduce_tokens(const Tensor& partial, const Tensor& out);
  // Where a replicated norm weight's gradient goes: straight into `grad`, or, under tp sequence
  // parallel (partial over this rank's rows), into tp_norm_grad_ slot `slot`, zeroed.
  Tensor norm_grad_target(const Tensor& grad, int slot);
  // Under tp sequence parallel: sums the norm-gradient slots 0..grads.size()-1 over tp and adds slot i
  // into grads[i] (the store's gradients, which may hold earlier micro-batches); a no-op otherwise.
  void finish_norm_grads(std::initializer_list<Tensor> grads);
  // The q/k norm weights' gradients (qk_norm): straight into `grad` at tp size 1; otherwise (partial
  // over this rank's heads) into tp_head_norm_grad_ slot `slot`, zeroed, which finish_head_norm_grads
  // sums over tp and adds into grads[i] (the store's gradients, which may hold earlier micro-batches).
  Tensor head_norm_grad_target(const Tensor& grad, int slot);
  void finish_head_norm_grads(std::initializer_list<Tensor> grads);
  // (N, V) full logits from every tp rank's (N, V/tp) columns (tests/export only).
  Tensor gather_vocab_logits(const Tensor& local);
  Tensor head_grad() const;
  // A model parameter by its HF name: with adapters, a modules_to_save copy of it (lora.hpp) when
  // there is one, else the (frozen) base's. Its gradient: the trained store's, or an empty Tensor (no
  // gradient) for a frozen base parameter.
  Tensor model_param(const std::string& name) const;
  Tensor compute_model_param(const std::string& name) const;  // the same in its compute copy, if any
  Tensor param_grad(const std::string& name) const;
  // LoRA (src/model/decoder_lora.cpp). Adapter of `module` of `layer` when targeted: forward
  // y += scale (x A^T) B^T keeping h = x A^T (N, r); backward dB += scale dy^T h, dA += dh^T x and
  // dx += dh A with dh = scale dy B. No-ops for an untargeted module.
  bool lora_targets(int layer, LoraModule module) const;
  void lora_forward(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x, const Tensor& h,
                    const Tensor& y);
  void lora_backward(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x, const Tensor& h,
                     const Tensor& dy, const Tensor& dx);
  // dropout(x) into lora_xd_ when training with lora_dropout > 0 (the same mask in the forward, its
  // recomputation and the backward); else x itself.
  Tensor lora_input(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x);
  uint64_t lora_dropout_key(int layer, LoraModule module) const;
  int64_t lora_feature_offset(LoraModule module, int64_t local_in) const;
  bool lora_dropping() const { return training_pass_ && lora_.dropout > 0; }
  // Where an adapter factor's gradient goes: the store, or for a factor replicated over tp (or over the
  // kv-sharing ranks) a zeroed slot of this layer's scratch, which finish_lora_grads sums over the
  // group and adds into the store (the sum must not include earlier micro-batches' gradients).
  Tensor lora_grad_target(int layer, LoraModule module, char factor);
  void finish_lora_grads();
  void init_lora(const DecoderAdapters& adapters);
  void allocate_lora_activations(LayerActivations& act, int64_t N);
  void allocate_lora_scratch(int64_t N);
  UnitHooks& hooks() { return hooks_ ? *hooks_ : no_hooks_; }
  SequenceAttention& attention() { return attention_ ? *attention_ : local_attention_; }

  ModelConfig config_;  // the full model
  ModelConfig local_;   // this tp rank's share: NH/tp, KVH/tp, F/tp, V/tp (= config_ without tp)
  Ops& ops_;
  ParameterStore& params_;
  bool checkpointing_;
  int64_t loss_chunk_tokens_;
  TokenLoss token_loss_;
  UnitHooks* hooks_ = nullptr;
  UnitHooks no_hooks_;
  SequenceAttention* attention_ = nullptr;
  LocalAttention local_attention_;
  Communicator* tp_comm_ = nullptr;       // device(): activations, logits chunks, head-norm grads
  Communicator* tp_host_comm_ = nullptr;  // host(): loss metrics and gathered logits in host vectors
  Communicator* kv_comm_ = nullptr;  // tp > KVH: the ranks sharing this rank's kv head
  Tensor kv_grad_;                   // tp > KVH: this micro-batch's k/v weight+bias grads (dWk, dbk, dWv, dbv)
  TpLayout tp_;
  bool tp_sp_ = false;               // tp sequence parallel (tp > 1 only)
  Tensor tp_norm_grad_;              // tp_sp_: (2, C) ((4, C) sandwich_norms) this micro-batch's partial norm grads of one unit
  Tensor tp_head_norm_grad_;         // qk_norm and tp > 1: (2, HS) this micro-batch's partial q/k norm grads
  // LoRA: null store = none.
  ParameterStore* lora_store_ = nullptr;
  LoraConfig lora_;
  LoraTargets lora_targets_;
  float lora_scale_ = 0;
  Tensor lora_dh_;                 // (N, r) compute dtype: scale dy B of one module
  Tensor lora_h_sum_;              // tp > 1: (N, r) F32, a row-parallel module's x A^T summed over tp
  Tensor lora_xd_, lora_dx_;       // dropout: (N, widest input) compute dtype: dropped x; dh A before its mask
  bool training_pass_ = false;     // the current pass has a backward (dropout applies)
  uint64_t training_step_ = 0;
  NeftuneNoise neftune_;
  Tensor lora_tp_grad_;            // tp > 1: this layer's tp-replicated factors' partial grads
  Tensor lora_kv_grad_;            // tp > KVH: this layer's kv-replicated B factors' partial grads
  int64_t lora_tp_used_ = 0, lora_kv_used_ = 0;
  std::vector<std::pair<Tensor, Tensor>> lora_tp_pending_, lora_kv_pending_;  // (store grad, scratch slot)
  Tensor inv_freq_;  // (HS/2)
  Tensor inv_freq_local_;  // (HS/2) rope_local_theta > 0: the sliding layers' frequencies
  Tensor norm_ones_;       // norm_weight_offset: (max(C, HS)) ones
  Tensor norm_scaled_;     // norm_weight_offset: (7, max(C, HS)) F32 1 + w of the norms in use
  std::vector<LayerActivations> acts_;
  std::unique_ptr<Scratch> scratch_;
  int64_t buffers_N_ = -1;
};

}  // namespace trlhpc
