// Decoder forward/backward orchestration: embedding, the layer stack, final norm and the fused loss.
// The per-layer math lives in decoder_layer.cpp.
#include "trlhpc/model/decoder.hpp"

#include <algorithm>

#include "src/model/decoder_internal.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

DeviceBatch DeviceBatch::upload(const Batch& batch, Ops& ops) {
  DeviceBatch d;
  d.B = batch.rows;
  d.T = batch.seq_len;
  d.collated_T = batch.collated_length();
  const int64_t N = batch.tokens();
  TRLHPC_ASSERT(static_cast<int64_t>(batch.input_ids.size()) == N && static_cast<int64_t>(batch.targets.size()) == N &&
                    static_cast<int64_t>(batch.positions.size()) == N && static_cast<int64_t>(batch.doc_ids.size()) == N,
                "batch arrays do not match rows x seq_len");
  auto put = [&](const std::vector<int32_t>& v) {
    Tensor t = ops.allocate({N}, DType::I32);
    ops.copy_from_host(t, v.data(), v.size() * sizeof(int32_t));
    return t;
  };
  d.input_ids = put(batch.input_ids);
  d.targets = put(batch.targets);
  d.host_targets = batch.targets;
  d.positions = put(batch.positions);
  d.doc_ids = put(batch.doc_ids);
  const std::vector<int32_t> none(batch.source_rows.empty() ? static_cast<size_t>(N) : 0, -1);
  d.source_rows = put(batch.source_rows.empty() ? none : batch.source_rows);
  d.source_columns = put(batch.source_columns.empty() ? none : batch.source_columns);
  return d;
}

Decoder::Decoder(ModelConfig config, Ops& ops, ParameterStore& params, bool gradient_checkpointing,
                 int64_t loss_chunk_tokens, DecoderParallelism parallelism, DecoderAdapters adapters,
                 TokenLoss token_loss)
    : config_(std::move(config)),
      local_(config_),
      ops_(ops),
      params_(params),
      checkpointing_(gradient_checkpointing),
      loss_chunk_tokens_(loss_chunk_tokens),
      token_loss_(token_loss),
      hooks_(parallelism.hooks),
      attention_(parallelism.attention),
      scratch_(std::make_unique<Scratch>()) {
  auto upload = [&](const std::vector<float>& host) {
    Tensor t = ops_.allocate({static_cast<int64_t>(host.size())});
    ops_.copy_from_host(t, host.data(), host.size() * sizeof(float));
    return t;
  };
  inv_freq_ = upload(rope_inverse_frequencies(config_));
  if (config_.rope_local_theta > 0) inv_freq_local_ = upload(rope_inverse_frequencies(config_, true));
  if (config_.norm_weight_offset) {
    const int64_t width = std::max(config_.hidden_size, config_.head_dim);
    norm_ones_ = upload(std::vector<float>(static_cast<size_t>(width), 1.0f));
    norm_scaled_ = ops_.allocate({7, width});
  }
  acts_.resize(static_cast<size_t>(config_.num_hidden_layers));
  init_tensor_parallel(parallelism);
  init_lora(adapters);
}

Decoder::~Decoder() = default;

Tensor Decoder::norm_scale(const Tensor& weight, int slot) {
  if (!config_.norm_weight_offset || !weight.data()) return weight;
  const Tensor scaled = norm_scaled_.view({weight.numel()}, slot * norm_scaled_.dim(1));
  ops_.cast(scaled, weight);                                        // F32 (of bf16(w) under --bf16)
  ops_.add_inplace(scaled, norm_ones_.view({weight.numel()}));  // 1 + w, as Gemma3RMSNorm in fp32
  return scaled;
}

const Tensor& Decoder::rope_frequencies(int64_t layer) const {
  return config_.layer_uses_local_rope(layer) ? inv_freq_local_ : inv_freq_;
}

Tensor Decoder::embedding_grad_ids(const DeviceBatch& batch) {
  if (!config_.embedding_padding_idx || !config_.pad_token_id) return batch.input_ids;
  std::vector<int32_t> ids(static_cast<size_t>(batch.input_ids.numel()));
  ops_.copy_to_host(ids.data(), batch.input_ids, ids.size() * sizeof(int32_t));
  for (int32_t& id : ids)
    if (id == *config_.pad_token_id) id = -1;
  Tensor out = ops_.allocate({static_cast<int64_t>(ids.size())}, DType::I32);
  ops_.copy_from_host(out, ids.data(), ids.size() * sizeof(int32_t));
  return out;
}

void Decoder::scale_embedding_rows(const Tensor& rows) {
  // transformers: embed(ids) * embed_scale.to(weight dtype); under --bf16 the product is rounded to
  // bf16 too (the rows already are bf16 values).
  const bool bf16 = ops_.compute_dtype() != DType::F32;
  ops_.scale_inplace(rows, config_.embedding_scale(bf16));
  if (bf16) {
    Scratch& s = *scratch_;
    ops_.cast(s.dx_compute, rows);
    ops_.cast(rows, s.dx_compute);
  }
}

void Decoder::add_neftune_noise(const DeviceBatch& batch, const Tensor& rows) {
  // transformers' hook sees the scaled embedding output (Gemma's scaled embedding module), as here. Under
  // tp sequence parallelism this rank holds block tp_.rank of the tokens (the reduce-scatter's).
  const int64_t n_local = rows.dim(0), first = tp_sp_ ? tp_.rank * n_local : 0;
  const float magnitude = neftune_magnitude(neftune_.alpha, batch.collated_T > 0 ? batch.collated_T : batch.T,
                                            config_.hidden_size);
  ops_.embedding_noise(rows, batch.source_rows.view({n_local}, first), batch.source_columns.view({n_local}, first),
                       magnitude, neftune_key(neftune_.seed, static_cast<int64_t>(training_step_)));
}

std::string Decoder::head_name() const {
  if (lora_store_ && lora_store_->has("lm_head.weight")) return "lm_head.weight";  // a modules_to_save copy
  return config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
}
Tensor Decoder::head_weight() const { return compute_model_param(head_name()); }
Tensor Decoder::head_grad() const { return param_grad(head_name()); }
Tensor Decoder::model_param(const std::string& name) const {
  return lora_store_ && lora_store_->has(name) ? lora_store_->param(name) : params_.param(name);
}
Tensor Decoder::compute_model_param(const std::string& name) const {
  return lora_store_ && lora_store_->has(name) ? lora_store_->compute_param(name) : params_.compute_param(name);
}
Tensor Decoder::param_grad(const std::string& name) const {
  if (!lora_store_) return params_.grad(name);
  return lora_store_->has(name) ? lora_store_->grad(name) : Tensor();  // the frozen base takes none
}

void Decoder::ensure_buffers(int64_t N) {
  if (N == buffers_N_) return;
  // The backend as the decoder's BufferSource.
  struct FromOps final : BufferSource {
    explicit FromOps(Ops& o) : ops(o) {}
    Tensor allocate(const Shape& shape, DType dtype) override { return ops.allocate(shape, dtype); }
    Ops& ops;
  } from_ops(ops_);
  allocate_decoder_buffers(from_ops, ops_.compute_dtype(), local_, N, local_tokens(N), checkpointing_, acts_, *scratch_);
  if (checkpointing_) allocate_lora_activations(scratch_->recompute, N);
  else
    for (LayerActivations& act : acts_) allocate_lora_activations(act, N);
  allocate_lora_scratch(N);
  buffers_N_ = N;
}

void Decoder::forward_to_final_hidden(const DeviceBatch& batch) {
  const int64_t N = batch.B * batch.T, L = config_.num_hidden_layers;
  ensure_buffers(N);
  Scratch& s = *scratch_;
  hooks().before_forward(0);
  // Vocab-parallel embedding: rows outside this rank's slice come out zero, so the sum over tp is
  // the full lookup (Megatron-LM sec. 3); under tp sequence parallel each rank keeps its rows of it.
  const Tensor embedded = tp_sp_ ? s.row_out : acts_[0].x_in;  // (N, C) partial lookup
  ops_.embedding_fwd(batch.input_ids, model_param("model.embed_tokens.weight"), embedded,
                     tp_.rank * local_.vocab_size);
  reduce_tokens(embedded, acts_[0].x_in);
  if (ops_.compute_dtype() != DType::F32) {  // the lookup of bf16(table): round the rows it produced
    ops_.cast(s.dx_compute, acts_[0].x_in);
    ops_.cast(acts_[0].x_in, s.dx_compute);
  }
  if (config_.scale_embeddings) scale_embedding_rows(acts_[0].x_in);
  if (training_pass_ && neftune_.enabled()) add_neftune_noise(batch, acts_[0].x_in);
  hooks().after_forward(0);
  for (int64_t l = 0; l < L; ++l) {
    LayerActivations& act = checkpointing_ ? s.recompute : acts_[static_cast<size_t>(l)];
    const Tensor& x_out = l + 1 < L ? acts_[static_cast<size_t>(l + 1)].x_in : s.x_final;
    hooks().before_forward(static_cast<int>(l + 1));
    layer_forward(static_cast<int>(l), batch, acts_[static_cast<size_t>(l)].x_in, act, x_out);
    hooks().after_forward(static_cast<int>(l + 1));
  }
  const int final_unit = static_cast<int>(L + 1);
  hooks().before_forward(final_unit);
  ops_.rmsnorm_fwd(s.x_final, norm_scale(compute_param(compute_model_param("model.norm.weight")), 6), s.h_final_local,
                   s.rstd_final, static_cast<float>(config_.rms_norm_eps));
  if (tp_sp_) gather_tokens(s.h_final_local, s.h_final);  // the vocab-parallel head needs every token
}

LossResult Decoder::run(const DeviceBatch& batch, float grad_scale, bool backward, bool defer_loss) {
  training_pass_ = backward;  // LoRA dropout in training passes only (PEFT's train / eval modes)
  const int64_t L = config_.num_hidden_layers;
  const int final_unit = static_cast<int>(L + 1);
  Scratch& s = *scratch_;
  forward_to_final_hidden(batch);
  if (config_.tie_word_embeddings) hooks().before_forward(0);  // the head reads unit 0's table
  if (backward) {
    // The loss writes the head's gradient (into unit L+1, or unit 0 when tied) before the backward walk
    // reaches that unit: announce its backward now, so a sharded strategy provides the unit's full
    // gradient buffer (ZeRO-2/3). before_backward(0) comes again before the embedding backward.
    hooks().before_backward(final_unit);
    if (config_.tie_word_embeddings) hooks().before_backward(0);
  }
  LossResult result;
  result = head_loss(batch, grad_scale, backward, defer_loss);  // backward: s.dh_local = dL/dh_final of this rank's rows
  if (!backward) {
    hooks().after_forward(final_unit);
    return result;
  }
  // Final norm backward: dx = d rmsnorm(x_final)
  const Tensor norm_grad = param_grad("model.norm.weight");
  ops_.rmsnorm_bwd(s.x_final, norm_scale(compute_param(compute_model_param("model.norm.weight")), 6), s.rstd_final,
                   s.dh_local, s.dx, norm_grad_target(norm_grad, 0));
  finish_norm_grads({norm_grad});
  hooks().after_backward(final_unit);
  for (int64_t l = L - 1; l >= 0; --l) {
    const int unit = static_cast<int>(l + 1);
    hooks().before_backward(unit);
    LayerActivations& act = acts_[static_cast<size_t>(l)];
    if (checkpointing_) {
      layer_forward(static_cast<int>(l), batch, act.x_in, s.recompute, s.x_recompute_out);
      layer_backward(static_cast<int>(l), batch, s.recompute, s.dx);
    } else {
      layer_backward(static_cast<int>(l), batch, act, s.dx);
    }
    hooks().after_backward(unit);
  }
  hooks().before_backward(0);
  if (!lora_store_ || lora_store_->has("model.embed_tokens.weight")) {  // a frozen embedding takes no gradient
    // (N, C): every token's row of the lookup, F32 (the embedding gradient never sees a bf16 rounding).
    const Tensor dx_all = gather_tokens(s.dx, s.row_out);
    if (config_.scale_embeddings)  // d(rows * scale) / d rows = scale, in fp32 (s.dx is not read again)
      ops_.scale_inplace(dx_all, config_.embedding_scale(ops_.compute_dtype() != DType::F32));
    ops_.embedding_bwd(embedding_grad_ids(batch), dx_all, param_grad("model.embed_tokens.weight"),
                       tp_.rank * local_.vocab_size);
  }
  hooks().after_backward(0);
  return result;
}

LossResult Decoder::forward_backward(const DeviceBatch& batch, float grad_scale) {
  LossResult result = run(batch, grad_scale, true);
  result.resolve();
  return result;
}

LossResult Decoder::forward_backward_deferred(const DeviceBatch& batch, float grad_scale) {
  return run(batch, grad_scale, true, /*defer_loss=*/true);
}

LossResult Decoder::forward_loss(const DeviceBatch& batch) { return run(batch, 0.0f, false); }

Tensor Decoder::layer_stack_output(const DeviceBatch& batch) {
  training_pass_ = false;
  forward_to_final_hidden(batch);
  hooks().after_forward(static_cast<int>(config_.num_hidden_layers + 1));
  const int64_t N = batch.B * batch.T;
  const Tensor out = ops_.allocate({N, config_.hidden_size});  // (N, C)
  if (tp_sp_) gather_tokens(scratch_->x_final, out);
  else ops_.copy(out, scratch_->x_final);
  return out;
}

Tensor Decoder::logits(const DeviceBatch& batch) {
  training_pass_ = false;
  forward_to_final_hidden(batch);
  if (config_.tie_word_embeddings) hooks().before_forward(0);
  const int64_t N = batch.B * batch.T;
  Tensor local = ops_.allocate({N, local_.vocab_size});  // this tp rank's vocabulary columns
  ops_.matmul(scratch_->h_final, false, head_weight(), true, local);
  if (config_.final_logit_softcapping > 0) ops_.logit_softcap(local, config_.final_logit_softcap());  // as the loss
  hooks().after_forward(static_cast<int>(config_.num_hidden_layers + 1));
  return gather_vocab_logits(local);
}

}  // namespace trlhpc
