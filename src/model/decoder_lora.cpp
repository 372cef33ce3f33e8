// LoRA adapters on the decoder's linears (lora.hpp): the low-rank update of each targeted projection,
// forward and backward, and the gradient sums tensor parallelism needs for the replicated factors.
//
// For a targeted module with input x (N, in), output y (N, out) and s = scale:
//   forward   h = x A^T (N, r);  y += s h B^T
//   backward  dB += s dy^T h;  dh = s dy B (N, r);  dA += dh^T x;  dx += dh A
// With lora_dropout p in training, x is replaced by dropout(x) = x * keep / (1 - p) in both, and dx gets
// (dh A) * keep / (1 - p). The keep mask is a pure function of (seed, step, layer, module, the token's
// dataset row and column, the global feature index) (core/philox.hpp), so the forward, a checkpointed
// recomputation and the backward draw the same mask, and so does every layout.
// Under tp the factors follow the base split (lora.hpp), so:
//   column-parallel (q/k/v, gate/up): x is whole (gathered under tp sequence parallel), h the same on
//     every rank; B is this rank's rows, so dh is partial over tp and dA (replicated A) is summed over
//     tp. dx joins the base's input gradient before its f-operator sum. k/v B kv-replicated (tp > KVH):
//     its dy is partial over the sharing ranks (their own query heads), so dB is summed over them.
//   row-parallel (o, down): x is this rank's columns, so x A^T is partial over tp. Its fp32 partials
//     are summed over tp (an (N, r) all-reduce) and rounded once into h, as one process rounds its whole
//     x A^T (rounding each rank's partial into bf16 moved a tp 2 curve by up to 1.4 % from 1 rank's);
//     tp rank 0 alone adds s h B^T to the base's partial output, which the g all-reduce completes. dy is
//     whole and h is whole, so dB = s dy^T h is complete and the same on every rank (no sum) and
//     dh = s dy B too; dA = dh^T x and dx += dh A are local.
#include <algorithm>

#include "src/model/decoder_internal.hpp"
#include "trlhpc/core/splitmix64.hpp"
#include "trlhpc/model/init.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

void Decoder::init_lora(const DecoderAdapters& adapters) {
  if (!adapters.lora) return;
  TRLHPC_ASSERT(adapters.store && adapters.targets, "DecoderAdapters: a LoRA config needs its store and targets");
  TRLHPC_ASSERT(adapters.store->tp_layout().size == tp_.size && adapters.store->tp_layout().rank == tp_.rank,
                "DecoderAdapters: the adapter store holds another tp rank's slices than the base");
  const LoraUnitLayout layout = lora_unit_layout(config_, *adapters.lora);
  TRLHPC_ASSERT(adapters.store->num_units() == layout.count, "DecoderAdapters: the store's units are not lora_unit_layout's");
  lora_store_ = adapters.store;
  lora_ = *adapters.lora;
  lora_targets_ = *adapters.targets;
  lora_scale_ = static_cast<float>(lora_.scale());
  // Scratch for the largest layer's replicated / kv-replicated factors (modules_to_save copies outside
  // the layers take the base's gradient paths).
  int64_t tp_max = 0, kv_max = 0;
  for (int u = layout.first_layer; u < layout.first_layer + layout.layers; ++u) {
    int64_t tp_n = 0, kv_n = 0;
    for (const ParameterSlot& slot : lora_store_->unit(u).slots) {
      if (slot.spec.tp_split == TpSplit::Replicated) tp_n += slot.numel;
      if (slot.spec.tp_split == TpSplit::KvReplicated) kv_n += slot.numel;
    }
    tp_max = std::max(tp_max, tp_n);
    kv_max = std::max(kv_max, kv_n);
  }
  if (tp_comm_) lora_tp_grad_ = ops_.allocate({std::max<int64_t>(1, tp_max)});
  if (kv_comm_) lora_kv_grad_ = ops_.allocate({std::max<int64_t>(1, kv_max)});
}

void Decoder::allocate_lora_scratch(int64_t N) {
  if (!lora_store_) return;
  lora_dh_ = ops_.allocate({N, lora_.r}, ops_.compute_dtype());
  if (tp_comm_) lora_h_sum_ = ops_.allocate({N, lora_.r});  // F32: row-parallel x A^T partials, summed over tp
  if (lora_.dropout <= 0) return;
  const int64_t widest = std::max({local_.hidden_size, local_.num_attention_heads * local_.head_dim,
                                   local_.intermediate_size});
  lora_xd_ = ops_.allocate({N, widest}, ops_.compute_dtype());
  lora_dx_ = ops_.allocate({N, widest}, ops_.compute_dtype());
}

void Decoder::allocate_lora_activations(LayerActivations& act, int64_t N) {
  if (!lora_store_) return;
  for (Tensor& h : act.lora_h) h = ops_.allocate({N, lora_.r}, ops_.compute_dtype());
}

bool Decoder::lora_targets(int layer, LoraModule module) const {
  return lora_store_ && lora_targets_[static_cast<size_t>(layer)][static_cast<size_t>(module)];
}

uint64_t Decoder::lora_dropout_key(int layer, LoraModule module) const {
  return splitmix64(init_stream_key("lora_dropout." + lora_parameter_name(layer, module, 'A'), lora_.dropout_seed) ^
                    splitmix64(training_step_));
}

int64_t Decoder::lora_feature_offset(LoraModule module, int64_t local_in) const {
  // Row-parallel inputs are this tp rank's block of the features; column-parallel ones are whole.
  return lora_module_row_parallel(module) ? tp_.rank * local_in : 0;
}

Tensor Decoder::lora_input(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x) {
  if (!lora_dropping()) return x;
  const int64_t N = x.dim(0), in = x.dim(1);
  const Tensor xd = lora_xd_.view({N, in});
  ops_.lora_dropout(x, xd, batch.source_rows, batch.source_columns, lora_feature_offset(module, in),
                    static_cast<float>(lora_.dropout), lora_dropout_key(layer, module));
  return xd;
}

void Decoder::lora_forward(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x_in, const Tensor& h,
                           const Tensor& y) {
  if (!lora_targets(layer, module)) return;
  const Tensor A = lora_store_->param(lora_parameter_name(layer, module, 'A'));  // (r, in)
  const Tensor B = lora_store_->param(lora_parameter_name(layer, module, 'B'));  // (out, r)
  const Tensor x = lora_input(layer, module, batch, x_in);  // dropout(x) when training
  if (tp_comm_ && lora_module_row_parallel(module)) {
    const Tensor partial = lora_h_sum_.view({x.dim(0), lora_.r});
    ops_.matmul(x, false, A, true, partial);  // (N, r) this rank's columns' share of x A^T, F32
    tp_all_reduce_sum(partial);
    if (h.dtype() == DType::F32) ops_.copy(h, partial);
    else ops_.cast(h, partial);  // rounded once, as one process rounds x A^T
    if (tp_.rank == 0) ops_.matmul(h, false, B, true, y, lora_scale_, 1.0f);  // g sums the ranks' outputs
    return;
  }
  ops_.matmul(x, false, A, true, h);                     // h (N, r) = x A^T
  ops_.matmul(h, false, B, true, y, lora_scale_, 1.0f);  // y (N, out) += s h B^T
}

Tensor Decoder::lora_grad_target(int layer, LoraModule module, char factor) {
  const std::string name = lora_parameter_name(layer, module, factor);
  const ParameterSpec& spec = lora_store_->slot(name).spec;
  const Tensor grad = lora_store_->grad(name);
  // A row-parallel B's gradient is complete on every rank (whole dy, whole h): no sum.
  const bool tp_sum = tp_comm_ && spec.tp_split == TpSplit::Replicated && !(lora_module_row_parallel(module) && factor == 'B');
  const bool kv_sum = kv_comm_ && spec.tp_split == TpSplit::KvReplicated;
  if (!tp_sum && !kv_sum) return grad;
  Tensor& scratch = tp_sum ? lora_tp_grad_ : lora_kv_grad_;
  int64_t& used = tp_sum ? lora_tp_used_ : lora_kv_used_;
  const Tensor slot = scratch.view(spec.shape, used);
  used += spec.numel();
  ops_.fill_zero(slot);
  (tp_sum ? lora_tp_pending_ : lora_kv_pending_).emplace_back(grad, slot);
  return slot;
}

void Decoder::lora_backward(int layer, LoraModule module, const DeviceBatch& batch, const Tensor& x_in, const Tensor& h,
                            const Tensor& dy, const Tensor& dx) {
  if (!lora_targets(layer, module)) return;
  const Tensor x = lora_input(layer, module, batch, x_in);  // the forward's dropout(x), drawn again
  const Tensor A = lora_store_->param(lora_parameter_name(layer, module, 'A'));  // (r, in)
  const Tensor B = lora_store_->param(lora_parameter_name(layer, module, 'B'));  // (out, r)
  const int64_t N = dy.dim(0);
  const Tensor dh = lora_dh_.view({N, lora_.r});
  ops_.matmul(dy, true, h, false, lora_grad_target(layer, module, 'B'), lora_scale_, 1.0f);  // dB += s dy^T h
  ops_.matmul(dy, false, B, false, dh, lora_scale_, 0.0f);                                     // dh = s dy B
  ops_.matmul(dh, true, x, false, lora_grad_target(layer, module, 'A'), 1.0f, 1.0f);          // dA += dh^T x
  if (!lora_dropping()) {
    ops_.matmul(dh, false, A, false, dx, 1.0f, 1.0f);  // dx += dh A
    return;
  }
  const Tensor dxd = lora_dx_.view({N, x.dim(1)});  // d dropout(x) = dh A, then through the same mask
  ops_.matmul(dh, false, A, false, dxd);
  ops_.lora_dropout(dxd, dxd, batch.source_rows, batch.source_columns, lora_feature_offset(module, x.dim(1)),
                    static_cast<float>(lora_.dropout), lora_dropout_key(layer, module));
  ops_.add_inplace(dx, dxd);
}

void Decoder::finish_lora_grads() {
  // Every rank of the group targets the same modules in the same order, so the scratch prefixes agree.
  if (lora_tp_used_ > 0) {
    tp_all_reduce_sum(lora_tp_grad_.view({lora_tp_used_}));
    for (const auto& [grad, slot] : lora_tp_pending_) ops_.add_inplace(grad, slot);
  }
  if (lora_kv_used_ > 0) {
    kv_all_reduce_sum(lora_kv_grad_.view({lora_kv_used_}));
    for (const auto& [grad, slot] : lora_kv_pending_) ops_.add_inplace(grad, slot);
  }
  lora_tp_used_ = lora_kv_used_ = 0;
  lora_tp_pending_.clear();
  lora_kv_pending_.clear();
}

}  // namespace trlhpc
