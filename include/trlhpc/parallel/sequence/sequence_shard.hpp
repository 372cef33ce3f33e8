#pragma once
// Sequence sharding: which tokens of a micro-batch each rank of a cp or sp group holds
// (ARCHITECTURE.md "Sequence parallel"). Pure functions of the Batch, so every rank computes its own
// shard without communication, and tests check them without MPI.
//
// Every row of T tokens is cut into equal chunks along the sequence:
//   zigzag (cp, ring attention)   2*P chunks; rank r keeps chunks r and 2P-1-r, concatenated. Under a
//                                 causal mask the work of a query chunk grows with its index, so pairing
//                                 an early chunk with its mirror gives every rank the same work (the
//                                 load balancing of Megatron-LM context parallel and Llama 3's CP,
//                                 Dubey et al. 2024 sec. 3.3.2).
//   contiguous (sp, Ulysses)      P chunks; rank r keeps chunk r (Jacobs et al. 2023, DeepSpeed-Ulysses:
//                                 the all-to-all makes every rank see the whole sequence for its heads,
//                                 so there is no imbalance to fix).
// Worked example, T = 8, P = 2, zigzag: chunks of 2 tokens c0=[0 1] c1=[2 3] c2=[4 5] c3=[6 7];
//   rank 0 keeps c0, c3 = tokens [0 1 6 7], rank 1 keeps c1, c2 = tokens [2 3 4 5].
// Contiguous, P = 2: rank 0 keeps [0 1 2 3], rank 1 keeps [4 5 6 7].
// cp x sp hybrid (Ulysses inside ring attention): the zigzag cp shard is split again into sp
// contiguous parts; Ulysses' all-to-all reassembles the cp shard (in sp rank order) for its heads, so
// the ring sees exactly its zigzag tokens. T = 16, cp 2, sp 2: cp rank 0 keeps [0..3, 12..15], its sp
// rank 0 [0 1 2 3] and sp rank 1 [12 13 14 15].
//
// Targets are shifted before sharding (batch.hpp), so the loss of a token never needs its neighbour;
// positions and doc ids travel with the tokens, so the attention mask (doc_q == doc_k && pos_q >=
// pos_k) stays exact however documents fall across chunks. T must split evenly: when the collated T
// (the longest row of the micro-batch, rounded to pad_to_multiple_of, which may be 0) is not a
// multiple of the chunk count, rows are first right-padded with padding tokens (id 0, position 0,
// doc id kPaddingDocId, target kIgnoreIndex), which carry no loss and are attended by no real token.
#include <cstdint>
#include <span>
#include <vector>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"

namespace trlhpc {

enum class SequenceShardKind { kZigzag, kContiguous };

// This rank's place in the group that shares a sequence.
struct SequenceShard {
  SequenceShardKind kind = SequenceShardKind::kContiguous;
  int size = 1;  // P: ranks sharing each sequence (cp or sp group size)
  int rank = 0;  // this rank's index in that group
  int inner_size = 1;  // cp x sp hybrid: the sp group splitting this shard again, contiguously
  int inner_rank = 0;

  // Chunks a row is cut into (2P zigzag, P contiguous, times inner_size); T must be a multiple of it.
  int64_t chunk_count() const;
  // Global chunk indices the outer shard keeps, in local order: {r, 2P-1-r} zigzag, {r} contiguous.
  // Chunks of the outer split (2P or P of them), not of chunk_count(): inner_size does not enter.
  std::vector<int64_t> kept_chunks() const;
};

// The shard of a rank at cp coordinate `cp_rank` and sp coordinate `sp_rank` of resolved `dims`:
// zigzag over cp when cp > 1 (split again contiguously over sp when sp > 1 too), else contiguous over
// sp (the identity when sp = 1 as well).
SequenceShard sequence_shard_for(const ParallelDims& dims, int cp_rank, int sp_rank);

// Right-pads every row to the next multiple of `multiple` (>= 1) with padding tokens; a copy when T
// already is one.
Batch pad_sequence(const Batch& batch, int64_t multiple);

// This rank's tokens of `batch`: (B, T') -> (B, T' / P) with T' = T padded to shard.chunk_count().
Batch shard_sequence(const Batch& batch, const SequenceShard& shard);

// Inverse of shard_sequence for tests: shards[r] is rank r's shard (all of one kind and group size
// shards.size()); returns the padded full batch.
Batch unshard_sequence(std::span<const Batch> shards, SequenceShardKind kind);

}  // namespace trlhpc
