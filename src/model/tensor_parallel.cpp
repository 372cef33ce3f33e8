// Tensor-parallel index math (include/trlhpc/model/tensor_parallel.hpp).
#include "trlhpc/model/tensor_parallel.hpp"

#include <algorithm>
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

void validate_tensor_parallel(const ModelConfig& config, int tp_size) {
  if (tp_size < 1) throw UserError("tp_size must be >= 1, got " + std::to_string(tp_size));
  auto require = [&](const char* field, int64_t value, const char* why) {
    if (value % tp_size != 0)
      throw UserError(std::string("tensor parallel: ") + field + " " + std::to_string(value) + " is not divisible by tp_size " +
                      std::to_string(tp_size) + " (" + why + "); choose a tp_size that divides it");
  };
  require("num_attention_heads", config.num_attention_heads, "q_proj is split by heads");
  // k_proj/v_proj split by kv heads when tp divides KVH; when tp is a multiple of KVH each kv head is
  // replicated on tp/KVH ranks (TpSplit::KvReplicated).
  if (config.num_key_value_heads % tp_size != 0 && tp_size % config.num_key_value_heads != 0)
    throw UserError("tensor parallel: num_key_value_heads " + std::to_string(config.num_key_value_heads) +
                    " and tp_size " + std::to_string(tp_size) +
                    " do not divide one another (k_proj/v_proj are split by kv heads, or each kv head is "
                    "replicated on tp_size / num_key_value_heads ranks); choose a tp_size that divides " +
                    std::to_string(config.num_key_value_heads) + " or is a multiple of it");
  require("intermediate_size", config.intermediate_size, "gate/up/down are split along intermediate_size");
  require("vocab_size", config.vocab_size, "the embedding and LM head are split by vocabulary rows; the vocabulary is not padded");
}

ModelConfig tp_local_config(const ModelConfig& config, int tp_size) {
  validate_tensor_parallel(config, tp_size);
  ModelConfig local = config;
  local.num_attention_heads /= tp_size;
  local.num_key_value_heads = std::max<int64_t>(1, local.num_key_value_heads / tp_size);  // 1 when replicated
  local.intermediate_size /= tp_size;
  local.vocab_size /= tp_size;
  return local;
}

Shape tp_full_shape(const ParameterSpec& local, int tp_size) {
  Shape shape = local.shape;
  if (local.tp_split == TpSplit::Rows) shape[0] *= tp_size;
  if (local.tp_split == TpSplit::Columns) shape[1] *= tp_size;
  if (local.tp_split == TpSplit::KvReplicated) shape[0] *= tp_size / local.tp_kv_share;  // KVH heads
  return shape;
}

ParameterSpec tp_full_spec(const ParameterSpec& local, int tp_size) {
  ParameterSpec full = local;
  full.shape = tp_full_shape(local, tp_size);
  full.tp_split = TpSplit::Replicated;
  full.tp_kv_share = 1;
  return full;
}

void for_each_tp_global_range(const ParameterSpec& local, TpLayout tp, int64_t begin, int64_t end,
                              const std::function<void(int64_t, int64_t, int64_t)>& visit) {
  TRLHPC_ASSERT(0 <= begin && begin <= end && end <= local.numel(), "bad tp-local range of " + local.name);
  if (begin == end) return;
  switch (local.tp_split) {
    case TpSplit::Replicated:
      visit(begin, end, 0);
      return;
    case TpSplit::Rows: {
      // Rank r's rows are one contiguous block of the full tensor.
      const int64_t start = static_cast<int64_t>(tp.rank) * local.numel();
      visit(start + begin, start + end, 0);
      return;
    }
    case TpSplit::KvReplicated: {
      // Rank r's kv head r / share is one contiguous block of rows.
      const int64_t start = static_cast<int64_t>(tp.rank / local.tp_kv_share) * local.numel();
      visit(start + begin, start + end, 0);
      return;
    }
    case TpSplit::Columns: {
      // Local (R, Kl) row i, columns [j0, j1) -> full (R, Kl*tp) row i, columns rank*Kl + [j0, j1).
      const int64_t Kl = local.shape[1], K = Kl * tp.size, col0 = static_cast<int64_t>(tp.rank) * Kl;
      for (int64_t i = begin / Kl; i * Kl < end; ++i) {
        const int64_t lo = std::max(begin, i * Kl), hi = std::min(end, (i + 1) * Kl);
        visit(i * K + col0 + (lo - i * Kl), i * K + col0 + (hi - i * Kl), lo - begin);
      }
      return;
    }
  }
}

void tp_assemble_full(const ParameterSpec& local, int tp_size, std::span<const float> gathered, std::span<float> full) {
  const int64_t n = local.numel();
  TRLHPC_ASSERT(static_cast<int64_t>(gathered.size()) == n * tp_size, "tp_assemble_full: gathered size of " + local.name);
  TRLHPC_ASSERT(static_cast<int64_t>(full.size()) == shape_numel(tp_full_shape(local, tp_size)),
                "tp_assemble_full: full size of " + local.name);
  if (local.tp_split == TpSplit::Replicated) {
    std::copy(gathered.begin(), gathered.begin() + n, full.begin());  // every rank holds the same values
    return;
  }
  for (int r = 0; r < tp_size; ++r) {
    // A kv-replicated head is written once, from the first rank of its sharing sub-group.
    if (local.tp_split == TpSplit::KvReplicated && r % local.tp_kv_share != 0) continue;
    for_each_tp_global_range(local, TpLayout{tp_size, r}, 0, n, [&](int64_t gb, int64_t ge, int64_t off) {
      std::copy(gathered.begin() + r * n + off, gathered.begin() + r * n + off + (ge - gb), full.begin() + gb);
    });
  }
}

}  // namespace trlhpc
