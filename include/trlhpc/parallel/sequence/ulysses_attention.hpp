#pragma once
// UlyssesAttention: sequence-parallel attention over the sp group by all-to-all (Jacobs et al. 2023,
// "DeepSpeed Ulysses: System Optimizations for Enabling Training of Extreme Long Sequence Transformer
// Models"; ALST, Bekman et al. 2025, for its use in Hugging Face training).
//
// Each of the P ranks holds a contiguous T/P slice of every row (parallel/sequence/sequence_shard.hpp). Before
// attention an all-to-all turns sequence sharding into head sharding:
//   q (B, T/P, NH, HS)  ->  (B, T, NH/P, HS)       rank r gets query heads [r NH/P, (r+1) NH/P)
//   k, v (B, T/P, KVH, HS) -> (B, T, KVH'/P, HS)  with the kv heads its query heads use
// and the positions/doc ids of the whole row are all-gathered, so one call of the attention primitive
// sees the full sequence for its heads. Another all-to-all brings o back to sequence sharding. The
// backward repeats the forward all-to-alls (q, k, v, o, do), calls the primitive's backward and sends
// dq, dk, dv back; nothing but the lse is kept between forward and backward.
//
// GQA: with KVH >= P (KVH % P == 0) the kv heads split like the query heads (KVH' = KVH). With
// KVH < P (P % KVH == 0) every kv head is repeated rep = P / KVH times before the all-to-all, as
// DeepSpeed-Ulysses does, so that KVH' = P and each rank receives exactly the one kv head its query
// heads share; in backward the dk/dv of the rep copies are summed. ParallelDims::validate_model
// guarantees one of the two.
//
// lse layout (B*NH*T/P floats of the decoder's buffer): (B, NH/P, T), this rank's heads over the
// whole row, as the head-sharded primitive writes it; with an inner attention, whatever layout that
// one uses for (B, T, NH/P) queries.
//
// Inner attention (cp x sp hybrid, as in USP, Fang & Zhao 2024): what runs on the head-sharded
// tensors. By default LocalAttention (the "whole row" is on this rank); with RingAttention over the cp
// group the "whole row" is this rank's zigzag cp shard (sequence_shard.hpp splits it again over sp), and
// the ring brings the other cp shards' K/V for the NH/P heads: Ulysses inside, ring across.
#include <cstdint>
#include <memory>

#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

struct UlyssesAttentionStats {
  int64_t forward_calls = 0, backward_calls = 0;
  int64_t bytes_sent = 0;        // all-to-all and all-gather payload this rank sent to others
  double comm_seconds = 0;       // packing, all-to-alls and all-gathers
  double compute_seconds = 0;    // the attention primitive
};

class UlyssesAttention final : public SequenceAttention {
 public:
  // `sp` is the sp group's communicator (not owned; outlives this object). `inner` runs attention on
  // the head-sharded tensors (owned; null: LocalAttention). `gradient_dtype`: what dq/dk/dv travel in
  // when the activations are BF16 (--bf16): F32 (default, exact) or BF16 (accelerate's
  // seq_parallel_communication_data_type: bf16; rounds them once before the all-to-all, half the
  // bytes). With F32 activations everything travels in F32.
  explicit UlyssesAttention(Communicator& sp, std::unique_ptr<SequenceAttention> inner = nullptr,
                            DType gradient_dtype = DType::F32);
  ~UlyssesAttention() override;

  void forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos, const Tensor& doc,
               const Tensor& o, const Tensor& lse, const AttentionShape& s) override;
  void backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                const Tensor& dout, const Tensor& pos, const Tensor& doc, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, const AttentionShape& s) override;

  const UlyssesAttentionStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  int64_t workspace_bytes() const override;  // bytes of the head-sharded buffers currently allocated
  // What workspace_bytes() will be after a call with local shape s over sp ranks (the memory plan's count).
  static int64_t planned_workspace_bytes(const AttentionShape& s, int sp, DType act_dtype);
  // The shape the inner attention runs on: every token of the row, this rank's share of the heads
  // (kv heads copied when there are fewer than sp).
  static AttentionShape head_sharded_shape(const AttentionShape& s, int sp);

  struct Workspace;  // defined in src/parallel/sequence/ulysses_attention.cpp

 private:
  Workspace& workspace(Ops& ops, const AttentionShape& s, DType act_dtype);

  Communicator& comm_;
  std::unique_ptr<SequenceAttention> inner_;  // null: local_
  DType gradient_dtype_;
  LocalAttention local_;
  UlyssesAttentionStats stats_;
  std::unique_ptr<Workspace> ws_;  // buffers sized for the last shape seen
};

}  // namespace trlhpc
