// Incremental decoding with a KV cache: the forward of decoder_layer.cpp for the n newest tokens of
// one sequence, their queries attending to the keys their layer keeps plus their own (the attention
// primitive with Tq = n, Tk = kept + n; the causal mask pos_q >= pos_k makes a prompt's prefill causal
// too, the window mask of a sliding layer hides what its W - 1 kept keys hold beyond a query's window).
// A sliding layer keeps only its newest W - 1 tokens (kv_cache.hpp has the layout and an example).
//
// Tensor parallel as in training (Megatron-LM sec. 3): local heads and F-slice, the g operator's
// all-reduce after o_proj / down_proj and the partial embedding lookup, the vocab-parallel head's
// columns all-gathered at the end. The cache holds this rank's kv heads. Same unit hooks as a forward,
// so a sharded strategy gathers each unit before use.
#include <algorithm>
#include <cmath>
#include <utility>
#include <string>

#include "src/model/decoder_internal.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

KvCache Decoder::make_kv_cache(int64_t capacity) {
  TRLHPC_ASSERT(capacity > 0, "a KV cache needs room for at least one token");
  const int64_t KD = local_.num_key_value_heads * local_.head_dim;
  KvCache cache;
  cache.capacity = capacity;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const int64_t window = local_.attention_window(l);
    const int64_t rows = window > 0 ? std::min(window, capacity) : capacity;  // W - 1 kept + 1 new token
    cache.window.push_back(window);
    cache.keys.push_back(ops_.allocate({rows, KD}));
    cache.values.push_back(ops_.allocate({rows, KD}));
  }
  std::vector<int32_t> positions(static_cast<size_t>(capacity));
  for (int64_t t = 0; t < capacity; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  cache.positions = ops_.allocate({capacity}, DType::I32);
  ops_.copy_from_host(cache.positions, positions.data(), positions.size() * sizeof(int32_t));
  cache.doc_ids = ops_.zeros({capacity}, DType::I32);
  return cache;
}

namespace {
// After a sliding layer's step over `total` keys in `keys`/`values` (the cache's buffer, or a transient
// one when `transient`), leave its newest W - 1 in rows [0, W - 1) of the cache's buffer. A global
// layer's keys are already in place. Copies never overlap (the backends' copy is a memcpy): a shift
// inside the cache's own buffer goes through a scratch tensor.
void keep_window_rows(Ops& ops, KvCache& cache, size_t layer, const Tensor& keys, const Tensor& values, int64_t total,
                      bool transient) {
  const int64_t window = cache.window[layer];
  if (window <= 0) return;
  const int64_t keep = std::min(total, window - 1), drop = total - keep;
  if (drop == 0 && !transient) return;
  const int64_t KD = keys.dim(1);
  for (const auto& [from, to] : {std::pair{keys, cache.keys[layer]}, std::pair{values, cache.values[layer]}}) {
    const Tensor newest = from.view({keep, KD}, drop * KD);
    if (transient) {
      ops.copy(to.view({keep, KD}), newest);
    } else {
      const Tensor scratch = ops.allocate({keep, KD});
      ops.copy(scratch, newest);
      ops.copy(to.view({keep, KD}), scratch);
    }
  }
}

// x += the residual branch (its bias, and Gemma's output norm into `normed` with `rstd` as scratch).
void add_branch(Ops& ops, const ModelConfig& c, const Tensor& x, const Tensor& branch, const Tensor& bias,
                const Tensor& norm, const Tensor& normed, const Tensor& rstd) {
  if (!c.sandwich_norms) {
    ops.add_inplace(x, branch);
    if (bias.data()) ops.bias_add(x, bias);
    return;
  }
  if (bias.data()) ops.bias_add(branch, bias);
  ops.rmsnorm_fwd(branch, norm, normed, rstd, static_cast<float>(c.rms_norm_eps));
  ops.add_inplace(x, normed);
}

// The activations of one incremental step over n tokens, reused by every layer.
struct StepBuffers {
  Tensor x, h, rstd, branch;   // (n, C), (n, C), (n), (n, C)
  Tensor q, attn, lse;         // (n, QD), (n, QD), (NH * n)
  Tensor gate, up, act;        // (n, F) each
  Tensor q_pre, k_pre;         // qk_norm: the q/k_proj outputs before their per-head norms (n, QD), (n, KD)
  Tensor q_rstd, k_rstd;       // qk_norm: the norms' rstd (n * NH), (n * KVH)
};

StepBuffers allocate_step(Ops& ops, const ModelConfig& c, int64_t n) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, NH = c.num_attention_heads;
  const int64_t QD = NH * c.head_dim, KD = c.num_key_value_heads * c.head_dim;
  StepBuffers b;
  b.x = ops.allocate({n, C}), b.h = ops.allocate({n, C}), b.rstd = ops.allocate({n}), b.branch = ops.allocate({n, C});
  b.q = ops.allocate({n, QD}), b.attn = ops.allocate({n, QD}), b.lse = ops.allocate({NH * n});
  b.gate = ops.allocate({n, F}), b.up = ops.allocate({n, F}), b.act = ops.allocate({n, F});
  b.q_pre = c.qk_norm ? ops.allocate({n, QD}) : b.q;
  if (c.qk_norm) {
    b.k_pre = ops.allocate({n, KD});
    b.q_rstd = ops.allocate({n * NH}), b.k_rstd = ops.allocate({n * c.num_key_value_heads});
  }
  return b;
}

// A layer's keys and values for one step: `kept` cached tokens (positions start - kept ..) and the n new
// ones after them, in the cache's own buffer when they fit, else in a transient one that starts with a
// copy of the kept.
struct LayerKeys {
  Tensor keys, values;  // (>= kept + n, KD)
  bool transient = false;
};

LayerKeys layer_keys(Ops& ops, KvCache& cache, size_t layer, int64_t n) {
  const int64_t kept = cache.kept(layer), total = kept + n, KD = cache.keys[layer].dim(1);
  LayerKeys out{cache.keys[layer], cache.values[layer], total > cache.rows(layer)};
  if (!out.transient) return out;
  out.keys = ops.allocate({total, KD}), out.values = ops.allocate({total, KD});  // (kept + n, KD)
  if (kept > 0) {
    ops.copy(out.keys.view({kept, KD}), cache.keys[layer].view({kept, KD}));
    ops.copy(out.values.view({kept, KD}), cache.values[layer].view({kept, KD}));
  }
  return out;
}
}  // namespace

std::vector<float> Decoder::forward_incremental(KvCache& cache, std::span<const int32_t> ids) {
  const ModelConfig& c = local_;
  const int64_t n = static_cast<int64_t>(ids.size()), start = cache.length, Tk = start + n;
  const int64_t C = c.hidden_size, NH = c.num_attention_heads, KVH = c.num_key_value_heads, HS = c.head_dim,
                KD = KVH * HS, L = c.num_hidden_layers;
  TRLHPC_ASSERT(!tp_sp_, "incremental decoding runs without tp sequence parallel");
  TRLHPC_ASSERT(n > 0 && Tk <= cache.capacity, "KV cache overflow: " + std::to_string(Tk) + " tokens for a cache of " +
                                                   std::to_string(cache.capacity));
  const float eps = static_cast<float>(c.rms_norm_eps);

  Tensor token_ids = ops_.allocate({n}, DType::I32);  // (n)
  ops_.copy_from_host(token_ids, ids.data(), ids.size() * sizeof(int32_t));
  const Tensor q_pos = cache.positions.view({n}, start);
  const Tensor q_doc = cache.doc_ids.view({n}), k_doc = cache.doc_ids.view({Tk});
  const StepBuffers b = allocate_step(ops_, c, n);
  const Tensor &x = b.x, &h = b.h, &rstd = b.rstd, &branch = b.branch, &q = b.q, &attn = b.attn, &lse = b.lse;

  hooks().before_forward(0);
  ops_.embedding_fwd(token_ids, params_.param("model.embed_tokens.weight"), x, tp_.rank * local_.vocab_size);
  tp_all_reduce_sum(x);  // vocab-parallel lookup: rows outside this rank's slice were zero
  if (config_.scale_embeddings) ops_.scale_inplace(x, config_.embedding_scale(false));  // Gemma (fp32 here)
  hooks().after_forward(0);

  AttentionShape shape;
  shape.B = 1, shape.Tq = n, shape.NH = NH, shape.KVH = KVH, shape.HS = HS;
  shape.scale = c.attention_scale();
  shape.softcap = c.attention_softcap();  // the training forward's cap (decoder_layer.cpp attention_shape)
  for (int64_t l = 0; l < L; ++l) {
    hooks().before_forward(static_cast<int>(l + 1));
    const LayerTensors w = norm_scales(layer_tensors(params_, c, static_cast<int>(l), StoreView::Params));
    const size_t li = static_cast<size_t>(l);
    const int64_t kept = cache.kept(li), Tk_l = kept + n;
    const auto [keys, values, transient] = layer_keys(ops_, cache, li, n);
    const Tensor k_new = keys.view({n, KD}, kept * KD), v_new = values.view({n, KD}, kept * KD);

    ops_.rmsnorm_fwd(x, w.ln1, h, rstd, eps);
    linear(ops_, h, w.wq, w.bq, b.q_pre);
    linear(ops_, h, w.wk, w.bk, c.qk_norm ? b.k_pre : k_new);
    linear(ops_, h, w.wv, w.bv, v_new);
    if (c.qk_norm) {  // Qwen3: per-head RMSNorm of q and k before RoPE; the cache keeps normed keys
      ops_.rmsnorm_fwd(b.q_pre, w.qn, q, b.q_rstd, eps);
      ops_.rmsnorm_fwd(b.k_pre, w.kn, k_new, b.k_rstd, eps);
    }
    if (c.layer_uses_rope(l)) {
      ops_.rope_fwd(q.reshape({n, NH, HS}), q_pos, rope_frequencies(l));
      ops_.rope_fwd(k_new.reshape({n, KVH, HS}), q_pos, rope_frequencies(l));
    }
    shape.window = cache.window[li];
    shape.Tk = Tk_l;
    const Tensor k_pos = cache.positions.view({Tk_l}, start - kept);  // (kept + n): start - kept, .., start + n - 1
    ops_.attention_fwd(q, keys.view({Tk_l, KD}), values.view({Tk_l, KD}), q_pos, k_pos, q_doc, k_doc.view({Tk_l}),
                       attn, lse, shape);
    keep_window_rows(ops_, cache, li, keys, values, Tk_l, transient);
    ops_.matmul(attn, false, w.wo, true, branch);
    tp_all_reduce_sum(branch);  // g: row-parallel o_proj's partial sums
    add_branch(ops_, c, x, branch, w.bo, w.ln_attn_out, h, rstd);

    ops_.rmsnorm_fwd(x, w.ln2, h, rstd, eps);
    linear(ops_, h, w.wg, w.bg, b.gate);
    linear(ops_, h, w.wu, w.bu, b.up);
    if (c.mlp_activation == MlpActivation::GeluTanh) ops_.geglu_tanh_fwd(b.gate, b.up, b.act);
    else ops_.swiglu_fwd(b.gate, b.up, b.act);
    ops_.matmul(b.act, false, w.wd, true, branch);
    tp_all_reduce_sum(branch);  // g: row-parallel down_proj's partial sums
    add_branch(ops_, c, x, branch, w.bd, w.ln_mlp_out, h, rstd);
    hooks().after_forward(static_cast<int>(l + 1));
  }
  cache.length = Tk;

  // Only the last token's logits are needed to pick the next one.
  const int final_unit = static_cast<int>(L + 1);
  hooks().before_forward(final_unit);
  const Tensor last = x.view({1, C}, (n - 1) * C), h_last = h.view({1, C}), rstd_last = rstd.view({1});
  ops_.rmsnorm_fwd(last, norm_scale(params_.param("model.norm.weight"), 6), h_last, rstd_last, eps);
  if (config_.tie_word_embeddings) hooks().before_forward(0);  // the head reads unit 0's table
  const Tensor local_logits = ops_.allocate({1, local_.vocab_size});  // (1, V/tp)
  ops_.matmul(h_last, false, head_weight(), true, local_logits);
  // Gemma 2: generation picks from the capped logits, as transformers' forward returns them (sampling's
  // temperature and top-p see the capped values; greedy sees the ties where tanh saturates).
  if (config_.final_logit_softcapping > 0) ops_.logit_softcap(local_logits, config_.final_logit_softcap());
  hooks().after_forward(final_unit);
  const Tensor logits = gather_vocab_logits(local_logits);  // (1, V)
  std::vector<float> out(static_cast<size_t>(config_.vocab_size));
  ops_.copy_to_host(out.data(), logits, out.size() * sizeof(float));
  return out;
}

}  // namespace trlhpc
