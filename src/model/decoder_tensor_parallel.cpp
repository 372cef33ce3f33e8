// Decoder pieces that exist for tensor parallelism (Megatron-LM, Shoeybi et al. 2019, sec. 3): the tp
// set-up, the collectives over the tp group, the LM-head loss (vocab-parallel cross-entropy when the
// vocabulary is split) and the full-logits gather for tests.
//
// Vocab-parallel cross-entropy, per chunk of tokens, with h = s.h_final rows (cm, C) and this rank's
// head slice W (Vl, C) for vocabulary ids [vocab_start, vocab_start + Vl):
//   z = h W^T (cm, Vl)                            local logits only: no rank holds a full-vocab row
//   m = all-reduce-max(rowmax z)                  global max for a stable softmax
//   (s, z_y) = all-reduce-sum(sum exp(z - m), z[y] from the rank that owns y)
//   loss_t = m + log s - z_y
//   dz = grad_scale (exp(z - m) / s - onehot(y))  local columns
//   dh = sum over tp of dz W                      each rank's vocabulary slice contributes to dh
//                                                 (all-reduce, or reduce-scatter of the rows under
//                                                 tp sequence parallel, once after the last chunk)
//   dW += dz^T h                                  this rank's rows of the head gradient
// With a final logit softcap c (Gemma 2), z is capped in place right after the GEMM (every statistic
// and TRL's metrics see the capped logits, as transformers' loss and TRL's outputs.logits do) and dz
// is multiplied by 1 - (z / c)^2 before it meets W and h.
// Label smoothing eps / DFT (kernels/token_loss.hpp): under smoothing one more all-reduced sum per token,
// l = sum over the slices of sum_v z, gives mean_v z = l / V for the smoothed term; the loss is then
// token_loss_from_statistics(m + log s, z_y, l / V), and dz = grad_scale w (exp(z - m) / s - (1 - eps)
// onehot(y) - eps / V) with w = p_y = exp(z_y - m) / s under DFT (from (s, z_y): no extra collective)
// or 1 (kernels/cpu/vocab_parallel_cross_entropy.cpp). The plain loss takes the steps above unchanged.
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "src/model/decoder_internal.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

void Decoder::init_tensor_parallel(const DecoderParallelism& parallelism) {
  const TpLayout layout = params_.tp_layout();  // the slices the store holds
  Communicator* tp = parallelism.tp;
  Communicator* kv_share = parallelism.kv_share;
  TRLHPC_ASSERT(tp ? tp->size() == layout.size && tp->rank() == layout.rank : layout.size == 1,
                "Decoder: the tp communicator (" + (tp ? std::to_string(tp->rank()) + " of " + std::to_string(tp->size())
                                                       : std::string("none")) +
                    ") does not match the ParameterStore's tp rank " + std::to_string(layout.rank) + " of " +
                    std::to_string(layout.size));
  local_ = tp_local_config(config_, layout.size);
  const int64_t share = layout.size > config_.num_key_value_heads ? layout.size / config_.num_key_value_heads : 1;
  TRLHPC_ASSERT(share == 1 ? kv_share == nullptr || kv_share->size() == 1
                           : kv_share && kv_share->size() == share && kv_share->rank() == layout.rank % share,
                "Decoder: the kv-sharing sub-group does not match tp rank " + std::to_string(layout.rank) +
                    " of " + std::to_string(layout.size) + " with " + std::to_string(config_.num_key_value_heads) +
                    " kv heads");
  TRLHPC_ASSERT(!tp || (parallelism.tp_host && parallelism.tp_host->size() == tp->size() &&
                        parallelism.tp_host->rank() == tp->rank()),
                "Decoder: DecoderParallelism::tp_host must be the host communicator of the tp group");
  tp_comm_ = tp;
  tp_host_comm_ = tp ? parallelism.tp_host : nullptr;
  tp_ = layout;
  kv_comm_ = share > 1 ? kv_share : nullptr;
  kv_grad_ = Tensor();
  if (kv_comm_) {
    const int64_t KD = local_.num_key_value_heads * local_.head_dim;
    kv_grad_ = ops_.allocate({2 * (KD * local_.hidden_size + KD)});
  }
  // At tp size 1 every rank already holds all tokens: sequence parallel would only add copies.
  tp_sp_ = parallelism.tp_sequence_parallel && layout.size > 1;
  // Slots: a layer's two norms (four with Gemma's sandwich norms), or the final norm.
  tp_norm_grad_ = tp_sp_ ? ops_.allocate({local_.sandwich_norms ? 4 : 2, local_.hidden_size}) : Tensor();
  tp_head_norm_grad_ = local_.qk_norm && layout.size > 1 ? ops_.allocate({2, local_.head_dim}) : Tensor();
}

int64_t Decoder::local_tokens(int64_t N) const {
  if (!tp_sp_) return N;
  TRLHPC_REQUIRE(N % tp_.size == 0, "tp_sequence_parallel: a micro-batch of " + std::to_string(N) +
                                        " tokens (rows x sequence length) does not split over tp_size " +
                                        std::to_string(tp_.size) +
                                        "; pad every row to a multiple of tp_size (ParallelDims::sequence_multiple)");
  return N / tp_.size;
}

Tensor Decoder::gather_tokens(const Tensor& local, const Tensor& full) {
  if (!tp_sp_) return local;
  TRLHPC_ASSERT(local.dtype() == full.dtype(), "gather_tokens: local and full dtypes differ");
  if (local.dtype() == DType::BF16) tp_comm_->all_gather(span_of<const uint16_t>(local), span_of<uint16_t>(full));
  else tp_comm_->all_gather(span_of<const float>(local), span_of<float>(full));
  return full;
}

void Decoder::reduce_tokens(const Tensor& partial, const Tensor& out) {
  if (!tp_sp_) {
    TRLHPC_ASSERT(partial.data() == out.data(), "reduce_tokens: without sequence parallel the sum is in place");
    tp_all_reduce_sum(out);
    return;
  }
  tp_comm_->reduce_scatter(span_of<const float>(partial), span_of<float>(out),
                           ReduceOp::Sum);
}

Tensor Decoder::norm_grad_target(const Tensor& grad, int slot) {
  if (!tp_sp_ || !grad.data()) return grad;  // empty: a frozen base computes no norm gradient
  const int64_t C = local_.hidden_size;
  const Tensor target = tp_norm_grad_.view({C}, slot * C);
  ops_.fill_zero(target);
  return target;
}

void Decoder::finish_norm_grads(std::initializer_list<Tensor> grads) {
  if (!tp_sp_ || !grads.begin()->data()) return;
  const int64_t C = local_.hidden_size, slots = static_cast<int64_t>(grads.size());
  const Tensor partial = tp_norm_grad_.view({slots, C});
  tp_all_reduce_sum(partial);
  int64_t slot = 0;
  for (const Tensor& grad : grads) ops_.add_inplace(grad, partial.view({C}, slot++ * C));
}

Tensor Decoder::head_norm_grad_target(const Tensor& grad, int slot) {
  if (!tp_head_norm_grad_.data() || !grad.data()) return grad;
  const int64_t HS = local_.head_dim;
  const Tensor target = tp_head_norm_grad_.view({HS}, slot * HS);
  ops_.fill_zero(target);
  return target;
}

void Decoder::finish_head_norm_grads(std::initializer_list<Tensor> grads) {
  if (!tp_head_norm_grad_.data() || !grads.begin()->data()) return;
  const int64_t HS = local_.head_dim, slots = static_cast<int64_t>(grads.size());
  const Tensor partial = tp_head_norm_grad_.view({slots, HS});
  tp_all_reduce_sum(partial);
  int64_t slot = 0;
  for (const Tensor& grad : grads) ops_.add_inplace(grad, partial.view({HS}, slot++ * HS));
}

void Decoder::tp_all_reduce_sum(const Tensor& t) {
  if (tp_comm_) tp_comm_->all_reduce(span_of<float>(t), ReduceOp::Sum);
}

void Decoder::kv_all_reduce_sum(const Tensor& t) {
  if (kv_comm_) kv_comm_->all_reduce(span_of<float>(t), ReduceOp::Sum);
}

void Decoder::tp_all_reduce_max(const Tensor& t) {
  if (tp_comm_) tp_comm_->all_reduce(span_of<float>(t), ReduceOp::Max);
}

LossResult Decoder::head_loss(const DeviceBatch& batch, float grad_scale, bool backward, bool defer_loss) {
  // The fused kernel is the fast path every backend has and what tp = 1 has always computed; the
  // vocab-parallel path is needed only when the head is split. Both are tested against each other
  // (tests/unit/test_cpu_vocab_parallel_cross_entropy.cpp, tests/mpi/test_tensor_parallel*.cpp).
  if (tp_.size > 1) return vocab_parallel_loss(batch, grad_scale, backward);
  Scratch& s = *scratch_;
  LossResult result;
  const bool host_copy = static_cast<int64_t>(batch.host_targets.size()) == batch.targets.numel();
  result.pending = ops_.cross_entropy_deferred(s.h_final, head_weight(), batch.targets, grad_scale,
                                               backward ? s.dh : Tensor(), backward ? head_grad() : Tensor(),
                                               loss_chunk_tokens_, &result.target_tokens, /*want_metrics=*/true,
                                               host_copy ? batch.host_targets.data() : nullptr,
                                               config_.final_logit_softcap(), token_loss_);
  if (!defer_loss) result.resolve();
  return result;
}

LossResult Decoder::vocab_parallel_loss(const DeviceBatch& batch, float grad_scale, bool backward) {
  Scratch& s = *scratch_;
  const int64_t N = batch.B * batch.T, C = config_.hidden_size, Vl = local_.vocab_size, V = config_.vocab_size;
  const int64_t vocab_start = tp_.rank * Vl;
  const float logit_cap = config_.final_logit_softcap();  // 0: none
  std::vector<int32_t> copied;  // (N) host copy for the loss and the count, unless the batch kept one
  if (static_cast<int64_t>(batch.host_targets.size()) != N) {
    copied.resize(static_cast<size_t>(N));
    ops_.copy_to_host(copied.data(), batch.targets, copied.size() * sizeof(int32_t));
  }
  const std::vector<int32_t>& targets = copied.empty() ? batch.host_targets : copied;
  LossResult result;
  for (int64_t t = 0; t < N; ++t) {
    const int32_t y = targets[static_cast<size_t>(t)];
    if (y == kIgnoreIndex) continue;
    TRLHPC_REQUIRE(y >= 0 && y < V, "cross-entropy: target " + std::to_string(y) + " of token " + std::to_string(t) +
                                        " is outside [0, " + std::to_string(V) + ") and is not the ignore index -100");
    ++result.target_tokens;
  }
  const Tensor W = head_weight(), dW = backward ? head_grad() : Tensor();  // (Vl, C)
  const int64_t chunk = std::max<int64_t>(1, std::min(loss_chunk_tokens_, N));
  Tensor logits = ops_.allocate({chunk, Vl});  // (chunk, Vl) logits, then dlogits
  Tensor row_max = ops_.allocate({chunk});     // (chunk)
  Tensor sums = ops_.allocate({chunk, 2});     // (chunk, 2) sum exp(z - m), z[target]
  Tensor stats = ops_.allocate({chunk, 2});    // (chunk, 2) TRL metrics: sum exp(z - m)(z - m), first max id
  const bool smoothing = token_loss_.label_smoothing > 0;
  Tensor logit_sums = smoothing ? ops_.allocate({chunk}) : Tensor();  // (chunk) sum_v z, label smoothing only
  std::vector<float> host_logit_sums(smoothing ? static_cast<size_t>(chunk) : 0);  // (chunk)
  std::vector<float> host_max(static_cast<size_t>(chunk)), host_sums(static_cast<size_t>(2 * chunk));
  std::vector<float> host_stats(static_cast<size_t>(2 * chunk)), weighted(static_cast<size_t>(chunk)),
      first_max(static_cast<size_t>(chunk));
  // Vocabulary ids travel as floats through the min all-reduce: exact below 2^24.
  result.metrics.computed = V < (int64_t{1} << 24);
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t cm = std::min(chunk, N - n0);
    const Tensor h = s.h_final.view({cm, C}, n0 * C);
    const Tensor y = batch.targets.view({cm}, n0);
    const Tensor z = logits.view({cm, Vl}), m = row_max.view({cm}), st = sums.view({cm, 2});
    ops_.matmul(h, false, W, true, z);
    if (logit_cap > 0) ops_.logit_softcap(z, logit_cap);
    ops_.vocab_parallel_ce_max(z, m);
    tp_all_reduce_max(m);
    ops_.vocab_parallel_ce_sums(z, y, vocab_start, m, st);
    tp_all_reduce_sum(st);
    ops_.copy_to_host(host_max.data(), m, static_cast<size_t>(cm) * sizeof(float));
    ops_.copy_to_host(host_sums.data(), st, static_cast<size_t>(2 * cm) * sizeof(float));
    if (smoothing) {
      const Tensor ls = logit_sums.view({cm});
      ops_.vocab_parallel_ce_logit_sums(z, y, ls);
      tp_all_reduce_sum(ls);
      ops_.copy_to_host(host_logit_sums.data(), ls, static_cast<size_t>(cm) * sizeof(float));
    }
    if (result.metrics.computed) {
      const Tensor mt = stats.view({cm, 2});
      result.metrics.computed = ops_.vocab_parallel_ce_metrics(z, y, vocab_start, V, m, mt);
      if (result.metrics.computed) {
        ops_.copy_to_host(host_stats.data(), mt, static_cast<size_t>(2 * cm) * sizeof(float));
        for (int64_t r = 0; r < cm; ++r) {
          weighted[static_cast<size_t>(r)] = host_stats[static_cast<size_t>(2 * r)];
          first_max[static_cast<size_t>(r)] = host_stats[static_cast<size_t>(2 * r + 1)];
        }
        if (tp_host_comm_) {
          tp_host_comm_->all_reduce(std::span<float>(weighted.data(), static_cast<size_t>(cm)), ReduceOp::Sum);
          tp_host_comm_->all_reduce(std::span<float>(first_max.data(), static_cast<size_t>(cm)), ReduceOp::Min);
        }
      }
    }
    for (int64_t r = 0; r < cm; ++r) {
      const int32_t target = targets[static_cast<size_t>(n0 + r)];
      if (target == kIgnoreIndex) continue;
      const double sum_exp = static_cast<double>(host_sums[static_cast<size_t>(2 * r)]);
      const double lse = static_cast<double>(host_max[static_cast<size_t>(r)]) + std::log(sum_exp);
      const double z_y = static_cast<double>(host_sums[static_cast<size_t>(2 * r + 1)]);
      const double z_mean =
          smoothing ? static_cast<double>(host_logit_sums[static_cast<size_t>(r)]) / static_cast<double>(V) : 0.0;
      result.loss_sum += token_loss_from_statistics(lse, z_y, z_mean, token_loss_);
      if (!result.metrics.computed) continue;
      result.metrics.entropy_sum += std::log(sum_exp) - static_cast<double>(weighted[static_cast<size_t>(r)]) / sum_exp;
      result.metrics.top1 += static_cast<int64_t>(first_max[static_cast<size_t>(r)]) == target;
    }
    if (!backward) continue;
    if (token_loss_.plain()) ops_.vocab_parallel_ce_grad(z, y, vocab_start, m, st, grad_scale, logit_cap);
    else ops_.vocab_parallel_ce_shaped_grad(z, y, vocab_start, V, m, st, grad_scale, logit_cap, token_loss_);
    const Tensor dh = s.dh.view({cm, C}, n0 * C);
    ops_.matmul(z, false, W, false, dh);  // dh (cm, C) = dz (cm, Vl) W (Vl, C): this slice's share
    if (dW.data()) ops_.matmul(z, true, h, false, dW, 1.0f, 1.0f);  // dW (Vl, C) += dz^T h (none when frozen)
  }
  // Every vocabulary slice contributes to dh: sum over tp (into this rank's rows under sequence parallel).
  if (backward) reduce_tokens(s.dh, s.dh_local);
  return result;
}

Tensor Decoder::gather_vocab_logits(const Tensor& local) {
  const int64_t N = local.dim(0), Vl = local.dim(1), P = tp_.size;
  std::vector<float> mine(static_cast<size_t>(N * Vl)), all(static_cast<size_t>(P * N * Vl));
  ops_.copy_to_host(mine.data(), local, mine.size() * sizeof(float));
  if (tp_host_comm_) tp_host_comm_->all_gather(mine, std::span<float>(all));
  else all = mine;
  // all = (P, N, Vl) in rank order -> full (N, P*Vl): rank r's slice is columns [r*Vl, (r+1)*Vl).
  std::vector<float> full(static_cast<size_t>(N * P * Vl));
  for (int64_t r = 0; r < P; ++r)
    for (int64_t n = 0; n < N; ++n)
      std::copy(all.begin() + (r * N + n) * Vl, all.begin() + (r * N + n + 1) * Vl, full.begin() + n * P * Vl + r * Vl);
  Tensor out = ops_.allocate({N, P * Vl});
  ops_.copy_from_host(out, full.data(), full.size() * sizeof(float));
  return out;
}

}  // namespace trlhpc
