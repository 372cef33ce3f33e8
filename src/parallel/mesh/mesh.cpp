#include "trlhpc/parallel/mesh/mesh.hpp"

#include "trlhpc/core/error.hpp"

namespace trlhpc {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::Tp: return "tp";
    case GroupKind::KvShare: return "kv_share";
    case GroupKind::Cp: return "cp";
    case GroupKind::Sp: return "sp";
    case GroupKind::DpReplicate: return "dp_replicate";
    case GroupKind::DpShard: return "dp_shard";
    case GroupKind::Dp: return "dp";
    case GroupKind::Fsdp: return "fsdp";
    case GroupKind::Loss: return "loss";
    case GroupKind::World: return "world";
  }
  return "?";
}

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::DpReplicate: return "dp_replicate";
    case MeshAxis::DpShard: return "dp_shard";
    case MeshAxis::Cp: return "cp";
    case MeshAxis::Sp: return "sp";
    case MeshAxis::Tp: return "tp";
  }
  return "?";
}

std::vector<MeshAxis> group_axes(GroupKind kind) {
  using A = MeshAxis;
  switch (kind) {
    case GroupKind::Tp: return {A::Tp};
    case GroupKind::KvShare: return {A::Tp};
    case GroupKind::Cp: return {A::Cp};
    case GroupKind::Sp: return {A::Sp};
    case GroupKind::DpReplicate: return {A::DpReplicate};
    case GroupKind::DpShard: return {A::DpShard};
    case GroupKind::Dp: return {A::DpReplicate, A::DpShard};
    case GroupKind::Fsdp: return {A::DpShard, A::Cp, A::Sp};
    case GroupKind::Loss: return {A::DpReplicate, A::DpShard, A::Cp, A::Sp};
    case GroupKind::World: return {A::DpReplicate, A::DpShard, A::Cp, A::Sp, A::Tp};
  }
  return {};
}

namespace {
// Which axes a group spans, as a mask indexed by MeshAxis.
std::array<bool, kNumMeshAxes> axis_mask(GroupKind kind) {
  std::array<bool, kNumMeshAxes> in_group{};
  for (MeshAxis a : group_axes(kind)) in_group[static_cast<size_t>(a)] = true;
  return in_group;
}
}  // namespace

Mesh::Mesh(const ParallelDims& dims)
    : dims_(dims), sizes_{dims.dp_replicate, dims.dp_shard, dims.cp, dims.sp, dims.tp} {
  int64_t product = 1;
  for (int s : sizes_) {
    TRLHPC_ASSERT(s >= 1, "Mesh needs resolved ParallelDims (every size >= 1), got " + dims.to_string());
    product *= s;
  }
  TRLHPC_ASSERT(product <= (int64_t{1} << 30), "mesh too large: " + dims.to_string());
  TRLHPC_ASSERT(dims.kv_share >= 1 && dims.tp % dims.kv_share == 0,
                "kv_share " + std::to_string(dims.kv_share) + " does not divide tp " + std::to_string(dims.tp));
  world_size_ = static_cast<int>(product);
}

int Mesh::kv_block(const MeshCoord& coords) const {
  return coords[static_cast<size_t>(MeshAxis::Tp)] / dims_.kv_share;
}
int Mesh::kv_index(const MeshCoord& coords) const {
  return coords[static_cast<size_t>(MeshAxis::Tp)] % dims_.kv_share;
}

MeshCoord Mesh::coords_of(int rank) const {
  TRLHPC_ASSERT(rank >= 0 && rank < world_size_, "rank " + std::to_string(rank) + " outside the mesh " + dims_.to_string());
  MeshCoord coords{};
  for (int a = kNumMeshAxes - 1; a >= 0; --a) {  // innermost (tp) first
    coords[static_cast<size_t>(a)] = rank % sizes_[static_cast<size_t>(a)];
    rank /= sizes_[static_cast<size_t>(a)];
  }
  return coords;
}

int Mesh::rank_of(const MeshCoord& coords) const {
  int rank = 0;
  for (size_t a = 0; a < kNumMeshAxes; ++a) {
    TRLHPC_ASSERT(coords[a] >= 0 && coords[a] < sizes_[a], "coordinate outside the mesh " + dims_.to_string());
    rank = rank * sizes_[a] + coords[a];
  }
  return rank;
}

int Mesh::group_size(GroupKind kind) const {
  if (kind == GroupKind::KvShare) return dims_.kv_share;
  int size = 1;
  for (MeshAxis a : group_axes(kind)) size *= axis_size(a);
  return size;
}

int Mesh::group_rank(GroupKind kind, int rank) const {
  const MeshCoord coords = coords_of(rank);
  if (kind == GroupKind::KvShare) return kv_index(coords);
  int index = 0;
  for (MeshAxis a : group_axes(kind)) index = index * axis_size(a) + coords[static_cast<size_t>(a)];
  return index;
}

int Mesh::group_color(GroupKind kind, int rank) const {
  const MeshCoord coords = coords_of(rank);
  const auto in_group = axis_mask(kind);
  int index = 0;
  for (size_t a = 0; a < kNumMeshAxes; ++a)
    if (!in_group[a]) index = index * sizes_[a] + coords[a];
  // kv_share: the kv-head block is one more coordinate outside the group.
  if (kind == GroupKind::KvShare) index = index * (dims_.tp / dims_.kv_share) + kv_block(coords);
  return index;
}

std::vector<int> Mesh::group_members(GroupKind kind, int rank) const {
  const auto axes = group_axes(kind);
  MeshCoord coords = coords_of(rank);
  const int size = group_size(kind);
  std::vector<int> members(static_cast<size_t>(size));
  if (kind == GroupKind::KvShare) {
    const int first = kv_block(coords) * dims_.kv_share;
    for (int g = 0; g < size; ++g) {
      coords[static_cast<size_t>(MeshAxis::Tp)] = first + g;
      members[static_cast<size_t>(g)] = rank_of(coords);
    }
    return members;
  }
  for (int g = 0; g < size; ++g) {
    int rest = g;  // decompose the group rank over the group's axes, innermost first
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      coords[static_cast<size_t>(*it)] = rest % axis_size(*it);
      rest /= axis_size(*it);
    }
    members[static_cast<size_t>(g)] = rank_of(coords);
  }
  return members;
}

}  // namespace trlhpc
