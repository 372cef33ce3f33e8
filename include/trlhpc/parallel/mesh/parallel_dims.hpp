#pragma once
// ParallelDims: how many ranks each parallelism spans. A plain value; everything that depends on the
// layout (mesh, groups, sharding) is derived from it.
//
//   dp_replicate  ranks holding full replicas of the (sharded) model        (HSDP outer dim)
//   dp_shard      ranks sharding parameters/grads/optimizer state (FSDP/ZeRO); -1 = "the rest"
//   cp            context parallel: ring attention over zigzag sequence chunks
//   sp            Ulysses sequence parallel: all-to-all between sequence and head sharding
//   tp            tensor parallel (Megatron column/row split)
//
// Validation is pure (no MPI), so every rank raises the same UserError before any collective.
// Messages name every number involved and say what to change.
#include <cstdint>
#include <string>

namespace trlhpc {

struct ParallelDims {
  int dp_replicate = 1;
  int dp_shard = -1;  // -1: infer as world_size / (dp_replicate * cp * sp * tp)
  int cp = 1;
  int sp = 1;
  int tp = 1;
  // --tp_sequence_parallel: the tokens outside the tp regions are split over tp too (decoder.hpp), so
  // each rank's sequence shard must divide by tp. Not a mesh dimension: the groups ignore it.
  bool tp_sequence_parallel = false;
  // Consecutive tp ranks holding a copy of the same kv head: tp / num_key_value_heads when tp exceeds
  // the kv heads, else 1. Derived from the model by for_model(); it cuts the tp axis into the mesh's
  // kv_share groups (mesh.hpp), whose k/v gradients are summed.
  int kv_share = 1;

  // Checks sizes (positive, or -1 for dp_shard), infers dp_shard, and requires
  // dp_replicate * dp_shard * cp * sp * tp == world_size. cp and sp may both be > 1 (Ulysses inside
  // ring attention). Throws UserError.
  ParallelDims resolved(int world_size) const;

  // Attention heads must split evenly: num_heads and num_kv_heads by tp (column-parallel q/k/v), and
  // each tp rank's query heads by sp (Ulysses gives every sp rank whole heads). A tp rank's kv heads
  // must divide by sp, or sp by them (then Ulysses repeats each kv head sp / kv_heads times, as
  // DeepSpeed-Ulysses does for GQA). Call on resolved dims. Throws UserError.
  void validate_model(int num_heads, int num_kv_heads) const;
  // validate_model, then these dims with kv_share set for the model's kv heads. Call on resolved dims;
  // build the mesh (and so the process groups) from the result.
  ParallelDims for_model(int num_heads, int num_kv_heads) const;

  // Sequence lengths must split evenly: into 2*cp zigzag chunks for cp, into sp contiguous chunks for
  // sp, and each rank's shard into tp parts under tp sequence parallel. max_length (and
  // pad_to_multiple_of when > 0) must be multiples of sequence_multiple().
  // Call on resolved dims. Throws UserError.
  void validate_sequence(int64_t max_length, int64_t pad_to_multiple_of) const;

  // 2*cp when cp > 1 (zigzag: rank r keeps chunks r and 2cp-1-r), times sp, times tp under tp
  // sequence parallel. 1 for cp = sp = 1 without it. Rows are padded to it before sharding.
  int64_t sequence_multiple() const;

  int64_t world_size() const;  // product of all five (dp_shard must be resolved)
  int dp() const { return dp_replicate * dp_shard; }          // ranks that see different data
  int fsdp() const { return dp_shard * cp * sp; }              // ranks a parameter is sharded over
  int loss() const { return dp_replicate * dp_shard * cp * sp; }  // ranks holding different tokens

  // "dp_replicate 1 x dp_shard 4 x cp 1 x sp 1 x tp 2", + " (sequence parallel)" under tp sequence parallel
  std::string to_string() const;

  bool operator==(const ParallelDims&) const = default;
};

}  // namespace trlhpc
