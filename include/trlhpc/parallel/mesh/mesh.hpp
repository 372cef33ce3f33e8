#pragma once
// Mesh: world rank <-> coordinates on the five parallel axes, and which ranks form each group.
// Pure functions of ParallelDims (no MPI), so they are unit-tested and every rank predicts every group.
//
// Mixed radix, outer -> inner: dp_replicate, dp_shard, cp, sp, tp (tp varies fastest, so the ranks of
// a tp group are consecutive and, with block rank placement, share a node and its NVLink):
//
//   rank = (((dp_replicate * DS + dp_shard) * CP + cp) * SP + sp) * TP + tp
//
// Worked example: DR=2, DS=2, CP=1, SP=2, TP=2 (16 ranks). Rank 13:
//   13 % 2 = 1 -> tp 1;   13 / 2 = 6,  6 % 2 = 0 -> sp 0;   6 / 2 = 3, 3 % 1 = 0 -> cp 0;
//    3 % 2 = 1 -> dp_shard 1;   3 / 2 = 1 -> dp_replicate 1.   Check: ((((1*2+1)*1+0)*2+0)*2+1) = 13.
// A group holds the ranks whose coordinates agree on every axis outside the group's axes:
//   tp           {tp}                        rank 13: {12, 13}           (stride 1)
//   sp           {sp}                                 {13, 15}           (stride TP = 2)
//   cp           {cp}                                 {13}
//   dp_shard     {dp_shard}                           {9, 13}            (stride CP*SP*TP = 4)
//   dp_replicate {dp_replicate}                       {5, 13}            (stride DS*CP*SP*TP = 8)
//   dp           {dp_replicate, dp_shard}             {1, 5, 9, 13}      different data
//   fsdp         {dp_shard, cp, sp}                   {9, 11, 13, 15}    shard parameters
//   loss         {dp_replicate, dp_shard, cp, sp}     {1, 3, 5, ..., 15} different tokens
//   world        all five                             {0, ..., 15}
//   kv_share     {tp} cut into blocks of K = ParallelDims::kv_share consecutive tp ranks: the ranks
//                holding copies of the same kv head when tp > num_key_value_heads (size 1 otherwise).
//                With K = 2 above it would be {12, 13}; with K = 1 it is {13}.
// A rank's rank inside a group is the mixed-radix index of its coordinates on the group's axes (same
// outer -> inner order), so members sorted by group rank are also sorted by world rank. These are the
// color (index of the other coordinates) and key (own index) ProcessGroups passes to MPI_Comm_split.
#include <array>
#include <vector>

#include "trlhpc/parallel/mesh/parallel_dims.hpp"

namespace trlhpc {

enum class MeshAxis : int { DpReplicate = 0, DpShard = 1, Cp = 2, Sp = 3, Tp = 4 };
inline constexpr int kNumMeshAxes = 5;
using MeshCoord = std::array<int, kNumMeshAxes>;  // indexed by MeshAxis

enum class GroupKind : int { Tp, KvShare, Cp, Sp, DpReplicate, DpShard, Dp, Fsdp, Loss, World };
inline constexpr int kNumGroupKinds = 10;
inline constexpr std::array<GroupKind, kNumGroupKinds> kAllGroupKinds = {
    GroupKind::Tp, GroupKind::KvShare, GroupKind::Cp,   GroupKind::Sp,   GroupKind::DpReplicate,
    GroupKind::DpShard, GroupKind::Dp, GroupKind::Fsdp, GroupKind::Loss, GroupKind::World};

const char* group_kind_name(GroupKind kind);  // "tp", "dp_replicate", ...
const char* mesh_axis_name(MeshAxis axis);    // "tp", "dp_shard", ...
// The axes a group spans, outer -> inner (kv_share spans part of the tp axis only: {tp}).
std::vector<MeshAxis> group_axes(GroupKind kind);

class Mesh {
 public:
  // `dims` must be resolved (ParallelDims::resolved): every size >= 1.
  explicit Mesh(const ParallelDims& dims);

  const ParallelDims& dims() const { return dims_; }
  int world_size() const { return world_size_; }
  int axis_size(MeshAxis axis) const { return sizes_[static_cast<size_t>(axis)]; }

  MeshCoord coords_of(int rank) const;
  int rank_of(const MeshCoord& coords) const;

  int group_size(GroupKind kind) const;
  int group_rank(GroupKind kind, int rank) const;   // MPI_Comm_split key
  int group_color(GroupKind kind, int rank) const;  // MPI_Comm_split color: equal for members only
  std::vector<int> group_members(GroupKind kind, int rank) const;  // (group_size) world ranks by group rank

 private:
  ParallelDims dims_;
  // kv_share: this rank's tp coordinate split into (block of kv_share ranks, index inside the block).
  int kv_block(const MeshCoord& coords) const;
  int kv_index(const MeshCoord& coords) const;

  MeshCoord sizes_{};
  int world_size_ = 1;
};

}  // namespace trlhpc
