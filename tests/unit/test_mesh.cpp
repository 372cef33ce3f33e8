// Mesh: rank <-> coordinates and group membership for every factorisation of 1, 2, 4 and 8 ranks,
// checked against a brute-force definition (members = ranks agreeing on every axis outside the group).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "mpi/mesh_layouts.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/mesh.hpp"

namespace trlhpc {
namespace {

std::vector<int> brute_force_members(const Mesh& mesh, GroupKind kind, int rank) {
  std::array<bool, kNumMeshAxes> in_group{};
  for (MeshAxis a : group_axes(kind)) in_group[static_cast<size_t>(a)] = true;
  const MeshCoord mine = mesh.coords_of(rank);
  std::vector<int> members;
  for (int r = 0; r < mesh.world_size(); ++r) {
    const MeshCoord other = mesh.coords_of(r);
    bool same = true;
    for (size_t a = 0; a < kNumMeshAxes; ++a) same = same && (in_group[a] || other[a] == mine[a]);
    // kv_share: only the tp ranks of the same block of kv_share consecutive ones.
    const size_t tp = static_cast<size_t>(MeshAxis::Tp);
    const int K = mesh.dims().kv_share;
    if (kind == GroupKind::KvShare) same = same && other[tp] / K == mine[tp] / K;
    if (same) members.push_back(r);  // ascending world rank
  }
  return members;
}

TEST(Mesh, WorkedExampleFromHeader) {
  const Mesh mesh(ParallelDims{2, 2, 1, 2, 2});
  EXPECT_EQ(mesh.world_size(), 16);
  EXPECT_EQ(mesh.coords_of(13), (MeshCoord{1, 1, 0, 0, 1}));
  EXPECT_EQ(mesh.rank_of({1, 1, 0, 0, 1}), 13);
  EXPECT_EQ(mesh.group_members(GroupKind::Tp, 13), (std::vector<int>{12, 13}));
  EXPECT_EQ(mesh.group_members(GroupKind::Sp, 13), (std::vector<int>{13, 15}));
  EXPECT_EQ(mesh.group_members(GroupKind::Cp, 13), (std::vector<int>{13}));
  EXPECT_EQ(mesh.group_members(GroupKind::DpShard, 13), (std::vector<int>{9, 13}));
  EXPECT_EQ(mesh.group_members(GroupKind::DpReplicate, 13), (std::vector<int>{5, 13}));
  EXPECT_EQ(mesh.group_members(GroupKind::Dp, 13), (std::vector<int>{1, 5, 9, 13}));
  EXPECT_EQ(mesh.group_members(GroupKind::Fsdp, 13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(mesh.group_members(GroupKind::Loss, 13), (std::vector<int>{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(mesh.group_members(GroupKind::World, 13).size(), 16u);
  EXPECT_EQ(mesh.group_rank(GroupKind::Fsdp, 13), 2);
  EXPECT_EQ(mesh.group_rank(GroupKind::Loss, 13), 6);
}

TEST(Mesh, CoordinatesRoundTripForEveryFactorisation) {
  for (int world : {1, 2, 4, 8}) {
    for (const ParallelDims& dims : testing::all_layouts(world)) {
      SCOPED_TRACE(dims.to_string());
      const Mesh mesh(dims);
      ASSERT_EQ(mesh.world_size(), world);
      std::set<MeshCoord> seen;
      for (int r = 0; r < world; ++r) {
        const MeshCoord c = mesh.coords_of(r);
        for (int a = 0; a < kNumMeshAxes; ++a) {
          EXPECT_GE(c[static_cast<size_t>(a)], 0);
          EXPECT_LT(c[static_cast<size_t>(a)], mesh.axis_size(static_cast<MeshAxis>(a)));
        }
        EXPECT_EQ(mesh.rank_of(c), r);
        seen.insert(c);
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(world));
      // tp is the fastest axis: consecutive ranks differ in tp first.
      if (dims.tp > 1) {
        EXPECT_EQ(mesh.coords_of(1)[static_cast<size_t>(MeshAxis::Tp)], 1);
      }
    }
  }
}

TEST(Mesh, GroupMembersMatchBruteForceForEveryFactorisation) {
  for (int world : {1, 2, 4, 8}) {
    for (const ParallelDims& dims : testing::all_layouts(world)) {
      const Mesh mesh(dims);
      for (GroupKind kind : kAllGroupKinds) {
        SCOPED_TRACE(dims.to_string() + " group " + group_kind_name(kind));
        for (int r = 0; r < world; ++r) {
          const std::vector<int> want = brute_force_members(mesh, kind, r);
          const std::vector<int> got = mesh.group_members(kind, r);
          ASSERT_EQ(got, want) << "rank " << r;
          EXPECT_EQ(mesh.group_size(kind), static_cast<int>(want.size()));
          const auto pos = std::find(want.begin(), want.end(), r) - want.begin();
          EXPECT_EQ(mesh.group_rank(kind, r), static_cast<int>(pos));
          for (int other = 0; other < world; ++other) {
            const bool member = std::binary_search(want.begin(), want.end(), other);
            EXPECT_EQ(mesh.group_color(kind, other) == mesh.group_color(kind, r), member)
                << "rank " << r << " vs " << other;
          }
        }
      }
      EXPECT_EQ(mesh.group_size(GroupKind::Dp), dims.dp());
      EXPECT_EQ(mesh.group_size(GroupKind::Fsdp), dims.fsdp());
      EXPECT_EQ(mesh.group_size(GroupKind::Loss), dims.loss());
      EXPECT_EQ(mesh.group_size(GroupKind::World), world);
    }
  }
}

// tp above the kv heads: the kv_share groups cut each tp group into blocks of tp / KVH ranks.
TEST(Mesh, KvShareGroupsAreBlocksOfTheTpGroup) {
  const ParallelDims dims = ParallelDims{1, 2, 1, 1, 4}.resolved(8).for_model(8, 2);
  ASSERT_EQ(dims.kv_share, 2);
  const Mesh mesh(dims);
  EXPECT_EQ(mesh.group_members(GroupKind::KvShare, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh.group_members(GroupKind::KvShare, 6), (std::vector<int>{6, 7}));
  EXPECT_EQ(mesh.group_rank(GroupKind::KvShare, 7), 1);
  EXPECT_EQ((ParallelDims{1, 1, 1, 1, 8}.resolved(8).for_model(8, 1).kv_share), 8);
  EXPECT_EQ((ParallelDims{1, 4, 1, 1, 2}.resolved(8).for_model(8, 2).kv_share), 1);
  for (int K : {1, 2, 4, 8}) {
    ParallelDims d = ParallelDims{1, 1, 1, 1, 8}.resolved(8);
    d.kv_share = K;
    const Mesh m(d);
    for (int r = 0; r < 8; ++r) {
      SCOPED_TRACE("kv_share " + std::to_string(K) + " rank " + std::to_string(r));
      EXPECT_EQ(m.group_members(GroupKind::KvShare, r), brute_force_members(m, GroupKind::KvShare, r));
      EXPECT_EQ(m.group_size(GroupKind::KvShare), K);
      for (int other = 0; other < 8; ++other)
        EXPECT_EQ(m.group_color(GroupKind::KvShare, other) == m.group_color(GroupKind::KvShare, r), other / K == r / K);
    }
  }
}

TEST(Mesh, TensorParallelGroupsAreConsecutiveRanks) {
  const Mesh mesh(ParallelDims{1, 2, 1, 1, 4});
  EXPECT_EQ(mesh.group_members(GroupKind::Tp, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(mesh.group_members(GroupKind::DpShard, 5), (std::vector<int>{1, 5}));
}

TEST(Mesh, RejectsUnresolvedDims) {
  EXPECT_THROW(Mesh(ParallelDims{1, -1, 1, 1, 1}), RuntimeFailure);
  const Mesh mesh(ParallelDims{1, 2, 1, 1, 1});
  EXPECT_THROW(mesh.coords_of(2), RuntimeFailure);
}

TEST(ParallelDims, InfersDpShardFromTheWorld) {
  EXPECT_EQ((ParallelDims{1, -1, 1, 1, 2}.resolved(8)), (ParallelDims{1, 4, 1, 1, 2}));
  EXPECT_EQ((ParallelDims{2, -1, 1, 1, 1}.resolved(2)), (ParallelDims{2, 1, 1, 1, 1}));
  EXPECT_EQ((ParallelDims{1, -1, 2, 1, 1}.resolved(4)), (ParallelDims{1, 2, 2, 1, 1}));
  EXPECT_EQ((ParallelDims{}.resolved(1)), (ParallelDims{1, 1, 1, 1, 1}));
  EXPECT_EQ((ParallelDims{1, 1, 1, 1, 1}.sequence_multiple()), 1);
  EXPECT_EQ((ParallelDims{1, 1, 4, 1, 1}.sequence_multiple()), 8);
  EXPECT_EQ((ParallelDims{1, 1, 1, 4, 1}.sequence_multiple()), 4);
  // Tp sequence parallel splits each rank's part over tp as well.
  EXPECT_EQ((ParallelDims{1, 1, 1, 1, 2, true}.sequence_multiple()), 2);
  EXPECT_EQ((ParallelDims{1, 1, 2, 1, 2, true}.sequence_multiple()), 8);
  EXPECT_EQ((ParallelDims{1, 1, 1, 2, 4, true}.sequence_multiple()), 8);
  EXPECT_EQ((ParallelDims{1, 1, 2, 1, 2, false}.sequence_multiple()), 4);
}

}  // namespace
}  // namespace trlhpc
