#pragma once
// Shared-memory plan and tile choice of the CUDA attention kernels (kernels/cuda/attention.cu), in plain
// C++ so that the host runs exactly the code the kernels use to place their buffers, and the tile
// choice is unit-tested without a GPU (tests/unit/test_kernel_attention_tiles.cpp).
//
// Layout (rows: Br queries, Bc keys, HS head size; every region 128-byte aligned):
//   q, dout (Br, ldo) T  |  k, v (Bc, ldo) T  |  s, dp (Br, lds) fp32  |  p, ds (Br, ldp) T (bf16 only)
//   acc1, acc2 (acc_rows, ldacc) fp32: o (fwd), dk/dv (bwd dk/dv), dq (bwd dq)
//   row_a, row_b (Br) fp32: 1/l and lse (fwd), lse and delta (bwd)
//   q_pos, q_doc (Br) int32  |  k_pos, k_doc (Bc) int32
// Row paddings: fp32 operands 1 (odd strides: the SIMT product's 16 rows fall into distinct banks);
// bf16 operands 8 and fp32 accumulators 4 (WMMA needs strides that are multiples of 8 elements / 16 B).
// fp32 tiles write P and dS over S and dP; bf16 tiles need bf16 copies of them for the tensor cores.
// The dQ pass never reads P (only dS K), so it reserves no P region (docs/CUDA-REVIEW-FIXES.md defect 9).
#include <cstdint>

#if defined(__CUDACC__)
#define TRLHPC_HOST_DEVICE __host__ __device__
#else
#define TRLHPC_HOST_DEVICE
#endif

namespace trlhpc::kernels {

// The SIMT fp32 tile product keeps 4 rows per thread of a 16-row thread grid: tiles of more than 64
// rows (Br for S and O, Bc for dK/dV) would compute garbage (docs/CUDA-REVIEW-FIXES.md defect 8). The kernels
// trap on it and the chooser below never returns more.
inline constexpr int kMaxAttentionTileRows = 64;

enum class AttentionPass : int { kForward, kBackwardDkDv, kBackwardDq };

struct AttentionSmem {
  int ldo, lds, ldp, ldacc;
  int q, dout, k, v, s, dp, p, ds, acc1, acc2, row_a, row_b, q_pos, q_doc, k_pos, k_doc, bytes;

  // The plan of `pass` for tiles Br x Bc; bf16 = T is bf16 (else fp32). Offsets of unused regions are -1.
  TRLHPC_HOST_DEVICE static AttentionSmem make(bool bf16, AttentionPass pass, int Br, int Bc, int HS) {
    const bool backward = pass != AttentionPass::kForward;
    const int operand_pad = bf16 ? 8 : 1, accumulator_pad = bf16 ? 4 : 1, e = bf16 ? 2 : 4;
    AttentionSmem L{};
    L.ldo = HS + operand_pad;
    L.lds = Bc + accumulator_pad;  // S and dP are fp32 accumulators of the T product
    L.ldp = bf16 ? Bc + operand_pad : L.lds;
    L.ldacc = HS + accumulator_pad;
    int offset = 0;
    auto take = [&offset](int bytes) {
      const int at = (offset + 127) / 128 * 128;
      offset = at + bytes;
      return at;
    };
    L.q = take(Br * L.ldo * e);
    L.dout = backward ? take(Br * L.ldo * e) : -1;
    L.k = take(Bc * L.ldo * e);
    L.v = take(Bc * L.ldo * e);
    L.s = take(Br * L.lds * 4);
    L.dp = backward ? take(Br * L.lds * 4) : -1;
    const bool wants_p = pass != AttentionPass::kBackwardDq;
    L.p = !wants_p ? -1 : bf16 ? take(Br * L.ldp * e) : L.s;
    L.ds = !backward ? -1 : bf16 ? take(Br * L.ldp * e) : L.dp;
    const int acc_rows = pass == AttentionPass::kBackwardDkDv ? Bc : Br;
    L.acc1 = take(acc_rows * L.ldacc * 4);
    L.acc2 = pass == AttentionPass::kBackwardDkDv ? take(acc_rows * L.ldacc * 4) : -1;
    L.row_a = take(Br * 4);
    L.row_b = take(Br * 4);
    L.q_pos = take(Br * 4);
    L.q_doc = take(Br * 4);
    L.k_pos = take(Bc * 4);
    L.k_doc = take(Bc * 4);
    L.bytes = offset;
    return L;
  }
};

// The device's shared memory (cudaDeviceGetAttribute): opt-in maximum per block, per SM, and what the
// runtime reserves for each resident block on top of its dynamic shared memory.
struct SmemLimits {
  int per_block_optin = 0;     // cudaDevAttrMaxSharedMemoryPerBlockOptin (H100/H200: 232,448)
  int per_sm = 0;              // cudaDevAttrMaxSharedMemoryPerMultiprocessor (233,472)
  int reserved_per_block = 0;  // cudaDevAttrReservedSharedMemoryPerBlock (1,024)
};

struct AttentionTiles {
  int Br = 0, Bc = 0, smem = 0;  // Br = 0: no tile fits
};

// Blocks of `smem` dynamic bytes that one SM holds by shared memory alone.
inline int blocks_per_sm(int smem, const SmemLimits& limits) {
  if (smem > limits.per_block_optin) return 0;
  return limits.per_sm / (smem + limits.reserved_per_block);
}

// The largest tiles (Br in {64, 32, 16}: 256 / Br threads per row) whose shared memory lets two blocks
// share an SM (latency hiding), counting the per-block reservation (docs/CUDA-REVIEW-FIXES.md defect 2: budgeting
// half the opt-in maximum without it let the bf16 head-size-128 backward fit one block per SM), else
// the largest that fits at all. H200, bf16, HS 64: 64 x 64 for the forward and dQ.
inline constexpr int kAttentionTileCandidates[][2] = {{64, 64}, {64, 32}, {32, 64}, {32, 32}, {16, 32}, {16, 16}};
constexpr bool attention_tile_candidates_fit_the_product() {
  for (const auto& c : kAttentionTileCandidates)
    if (c[0] > kMaxAttentionTileRows || c[1] > kMaxAttentionTileRows) return false;
  return true;
}
static_assert(attention_tile_candidates_fit_the_product(), "attention tiles are at most kMaxAttentionTileRows rows");

inline AttentionTiles choose_attention_tiles(bool bf16, int HS, AttentionPass pass, const SmemLimits& limits) {
  for (const int blocks : {2, 1})
    for (const auto& c : kAttentionTileCandidates) {
      const AttentionSmem L = AttentionSmem::make(bf16, pass, c[0], c[1], HS);
      if (blocks_per_sm(L.bytes, limits) >= blocks) return AttentionTiles{c[0], c[1], L.bytes};
    }
  return AttentionTiles{};
}

}  // namespace trlhpc::kernels
