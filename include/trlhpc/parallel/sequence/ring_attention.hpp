#pragma once
// RingAttention: context-parallel attention over the cp group (Liu, Zaharia & Abbeel 2023, "Ring
// Attention with Blockwise Transformers for Near-Infinite Context").
//
// Each of the P ranks holds T/P tokens of every row, zigzag-sharded (parallel/sequence/sequence_shard.hpp):
// local chunks r and 2P-1-r of size Tc = T/(2P). Queries stay put; K/V blocks (with their positions
// and doc ids, which is all the mask needs) travel around the ring r -> r+1, so after P steps every
// query has met every key. Step i computes against the block of rank r-i while the block of step i+1
// is already in flight (send_recv_async), hiding the transfer behind the compute.
//
// Forward: per (row, query chunk) the first block's (o, lse) is written in place and later blocks are
// merged by log-sum-exp (Ops::attention_merge), so o and lse end as if attention had seen the whole
// row at once (Milakov & Gimelshein 2018 online softmax; blockwise as in Ring Attention sec. 3).
// Block skipping: a (query chunk, key chunk) pair with no allowed (q, k) pair is not computed. The test
// is exact for packing: per document, the smallest key position against the largest query position.
// With one causal document and zigzag sharding exactly half of the chunk pairs of every remote block
// are skipped (chunk r never sees the later chunks; for s < r chunk 2P-1-r sees both of rank s's
// chunks, for s > r only 2P-1-s), which is the load balance Megatron-LM CP and Llama 3 CP rely on.
//
// Backward (Ring Attention sec. 3; as ring-flash-attention): dq accumulates locally; each K/V block
// travels with its dK/dV accumulator. At step i a rank computes its contribution for the block it holds
// into a fresh buffer, adds the accumulator received from rank r-1 (its sum over steps < i) and passes
// the sum on while the next step computes. After the P-th step one more hop brings every accumulator
// home: rank r then holds the full dK/dV of its own K/V. attention_bwd is given the global o and lse.
//
// lse layout (B*NH*T floats of the decoder's buffer): (B, 2, NH, Tc), i.e. per (row, local chunk) one
// contiguous (NH, Tc) block, so each (row, chunk) is an independent call of the attention primitive.
// GQA needs nothing here: the primitive maps query heads to kv heads.
#include <cstdint>
#include <memory>

#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

// Counters since construction (or reset_stats), for tests and the benchmark.
struct RingAttentionStats {
  int64_t forward_calls = 0, backward_calls = 0;
  int64_t chunk_pairs = 0;          // (row, query chunk, key chunk) pairs met, forward and backward
  int64_t chunk_pairs_skipped = 0;  // of those, fully masked and not computed
  int64_t transfers = 0;            // point-to-point ring messages this rank sent (K/V, metadata, dK/dV)
  int64_t bytes_sent = 0;
  int64_t bytes_hidden = 0;         // of bytes_sent, in messages complete when the compute they overlap ended
  double compute_seconds = 0;       // attention primitive, merges and accumulations
  double wait_seconds = 0;          // blocked on ring transfers after the compute they overlap
};

class RingAttention final : public SequenceAttention {
 public:
  // `cp` is the cp group's communicator (not owned; outlives this object). Its buffers live where
  // the Ops given to forward/backward allocate (host for MPI + CPU, device for NCCL + CUDA).
  explicit RingAttention(Communicator& cp);
  ~RingAttention() override;

  // Shapes as SequenceAttention, with T the local length (even: two zigzag chunks).
  void forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos, const Tensor& doc,
               const Tensor& o, const Tensor& lse, const AttentionShape& s) override;
  void backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                const Tensor& dout, const Tensor& pos, const Tensor& doc, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, const AttentionShape& s) override;

  const RingAttentionStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  // Bytes of the ring buffers currently allocated (K/V double buffer, dK/dV buffers, block results).
  int64_t workspace_bytes() const override;
  // What workspace_bytes() will be after a call with local shape s (the memory plan's count).
  static int64_t planned_workspace_bytes(const AttentionShape& s, DType kv_dtype, DType o_dtype);

  struct Workspace;  // the ring buffers, defined in src/parallel/sequence/ring_attention.cpp

 private:
  Workspace& workspace(Ops& ops, const AttentionShape& s, DType kv_dtype, DType o_dtype);

  Communicator& comm_;
  RingAttentionStats stats_;
  std::unique_ptr<Workspace> ws_;  // buffers sized for the last shape seen
};

}  // namespace trlhpc
