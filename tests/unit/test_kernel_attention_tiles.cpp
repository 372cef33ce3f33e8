// The CUDA attention kernels' shared-memory plan and tile choice (trlhpc/kernels/attention_smem_plan.hpp),
// run on the CPU: the same code the kernels use to place their buffers and the launcher uses to size them.
//   defect 2: the two-blocks-per-SM budget must count the per-block reservation;
//   defect 8: no tile larger than the SIMT product's 64 rows;
//   defect 9: the dQ pass reserves no bf16 P region.
#include <gtest/gtest.h>

#include <vector>

#include "trlhpc/kernels/attention_smem_plan.hpp"

namespace trlhpc {
namespace {

using kernels::AttentionPass;
using kernels::AttentionSmem;
using kernels::SmemLimits;

// H100/H200 (sm_90): cudaDevAttrMaxSharedMemoryPerBlockOptin, ...PerMultiprocessor, ReservedSharedMemoryPerBlock.
constexpr SmemLimits kHopper{232448, 233472, 1024};
// A100 (sm_80) and an 8.6-class device.
constexpr SmemLimits kAmpere{166912, 167936, 1024};
constexpr SmemLimits kSm86{101376, 102400, 1024};

constexpr AttentionPass kPasses[] = {AttentionPass::kForward, AttentionPass::kBackwardDkDv, AttentionPass::kBackwardDq};

TEST(KernelAttentionTiles, TwoBlocksPerSmCountTheReservation) {
  // docs/CUDA-REVIEW-FIXES.md defect 2: bf16 HS 128 dK/dV picked 115,968 B under a budget of 232,448 / 2, so
  // 2 x (115,968 + 1,024) > 233,472 and only one block fit.
  for (const SmemLimits& limits : {kHopper, kAmpere, kSm86})
    for (const bool bf16 : {false, true})
      for (const int HS : {64, 80, 128, 256})
        for (const AttentionPass pass : kPasses) {
          if (bf16 && HS % 16 != 0) continue;
          const kernels::AttentionTiles t = kernels::choose_attention_tiles(bf16, HS, pass, limits);
          SCOPED_TRACE(testing::Message() << "bf16 " << bf16 << " HS " << HS << " pass " << static_cast<int>(pass)
                                          << " per SM " << limits.per_sm);
          const int smallest = AttentionSmem::make(bf16, pass, 16, 16, HS).bytes;
          if (smallest + limits.reserved_per_block > limits.per_sm || smallest > limits.per_block_optin) {
            EXPECT_EQ(t.Br, 0) << "nothing fits (fp32 HS 256 on a 100 KB device)";
            continue;
          }
          ASSERT_GT(t.Br, 0);
          EXPECT_LE(t.smem, limits.per_block_optin);
          EXPECT_EQ(t.smem, AttentionSmem::make(bf16, pass, t.Br, t.Bc, HS).bytes);
          // Where the smallest tile allows two blocks, the chosen one does too, reservation included.
          if (2 * (smallest + limits.reserved_per_block) <= limits.per_sm)
            EXPECT_LE(2 * (t.smem + limits.reserved_per_block), limits.per_sm) << "tile " << t.Br << "x" << t.Bc;
          EXPECT_GE(kernels::blocks_per_sm(t.smem, limits), 1);
        }
}

TEST(KernelAttentionTiles, HopperBf16Head128BackwardFitsTwoBlocks) {
  const kernels::AttentionTiles t = kernels::choose_attention_tiles(true, 128, AttentionPass::kBackwardDkDv, kHopper);
  EXPECT_EQ(kernels::blocks_per_sm(t.smem, kHopper), 2) << t.Br << "x" << t.Bc << ", " << t.smem << " B";
  EXPECT_NE(t.smem, 115968) << "the tile of the defect";
}

TEST(KernelAttentionTiles, NoTileExceedsTheProductsRows) {
  for (const SmemLimits& limits : {kHopper, kAmpere, kSm86, SmemLimits{1 << 20, 1 << 21, 0}})
    for (const AttentionPass pass : kPasses) {
      const kernels::AttentionTiles t = kernels::choose_attention_tiles(false, 64, pass, limits);
      EXPECT_LE(t.Br, kernels::kMaxAttentionTileRows);
      EXPECT_LE(t.Bc, kernels::kMaxAttentionTileRows);
    }
}

TEST(KernelAttentionTiles, DqPassReservesNoProbabilities) {
  const AttentionSmem dq = AttentionSmem::make(true, AttentionPass::kBackwardDq, 64, 64, 128);
  const AttentionSmem dkdv = AttentionSmem::make(true, AttentionPass::kBackwardDkDv, 64, 64, 128);
  EXPECT_EQ(dq.p, -1);
  EXPECT_GE(dq.ds, 0);
  EXPECT_GE(dkdv.p, 0);
  // fp32 aliases P onto S in the passes that use it.
  const AttentionSmem f = AttentionSmem::make(false, AttentionPass::kForward, 64, 64, 64);
  EXPECT_EQ(f.p, f.s);
}

// Every region a pass uses lies inside the plan, 128-byte aligned, and overlaps no other (the fp32
// aliases P = S and dS = dP excepted).
TEST(KernelAttentionTiles, RegionsAreDisjointAndInside) {
  for (const bool bf16 : {false, true})
    for (const AttentionPass pass : kPasses)
      for (const auto& tile : kernels::kAttentionTileCandidates) {
        const int Br = tile[0], Bc = tile[1], HS = 80, e = bf16 ? 2 : 4;
        const AttentionSmem L = AttentionSmem::make(bf16, pass, Br, Bc, HS);
        const int acc_rows = pass == AttentionPass::kBackwardDkDv ? Bc : Br;
        struct Region {
          int at, bytes;
        };
        std::vector<Region> regions = {{L.q, Br * L.ldo * e}, {L.k, Bc * L.ldo * e}, {L.v, Bc * L.ldo * e},
                                       {L.s, Br * L.lds * 4}, {L.acc1, acc_rows * L.ldacc * 4}, {L.row_a, Br * 4},
                                       {L.row_b, Br * 4}, {L.q_pos, Br * 4}, {L.q_doc, Br * 4}, {L.k_pos, Bc * 4},
                                       {L.k_doc, Bc * 4}};
        if (L.dout >= 0) regions.push_back({L.dout, Br * L.ldo * e});
        if (L.dp >= 0) regions.push_back({L.dp, Br * L.lds * 4});
        if (L.acc2 >= 0) regions.push_back({L.acc2, acc_rows * L.ldacc * 4});
        if (bf16 && L.p >= 0) regions.push_back({L.p, Br * L.ldp * e});
        if (bf16 && L.ds >= 0) regions.push_back({L.ds, Br * L.ldp * e});
        for (size_t i = 0; i < regions.size(); ++i) {
          EXPECT_EQ(regions[i].at % 128, 0);
          EXPECT_LE(regions[i].at + regions[i].bytes, L.bytes);
          for (size_t j = i + 1; j < regions.size(); ++j)
            EXPECT_TRUE(regions[i].at + regions[i].bytes <= regions[j].at ||
                        regions[j].at + regions[j].bytes <= regions[i].at)
                << "regions " << i << " and " << j << " overlap";
        }
      }
}

TEST(KernelAttentionTiles, NoTileWhenNothingFits) {
  const kernels::AttentionTiles t =
      kernels::choose_attention_tiles(false, 512, AttentionPass::kBackwardDkDv, SmemLimits{16384, 32768, 1024});
  EXPECT_EQ(t.Br, 0);
}

}  // namespace
}  // namespace trlhpc
