#pragma once
// The blocking driver of trlhpc's own fp32 GEMMs (gemm_avx512.cpp, gemm_avx2.cpp): Goto & van de
// Geijn's loops around an MR x NR register tile that each file writes for its vector width.
//
//   c (M, N) = alpha * op(a) (M, K) @ op(b) (K, N) + beta * c          (row-major, any transposes)
//
// Loops: columns in blocks of NC; K in equal blocks of at most KC (896 -> 2 x 448), each packing a
// (KC x NR) panel of op(b) per NR columns, cooperatively; then equal tasks (rows in blocks of <= MC,
// a multiple of MR; columns in equal runs of panels, >= 4 tasks per thread) run dynamically.
// a is read in place by the tile, except a last partial panel of fewer than MR rows, packed with zeros;
// or, for a Tile with kPackA, packed whole per (row block, K block) and reused across the task's panels.
// Determinism: every c element sums k in the same order (K blocks in order, k in order inside), and
// c = alpha * acc + beta * c after each K block (beta = 1 after the first), whatever the thread count
// and whatever M/N slice it sits in. The K blocks are the same for every Tile, which is what lets the
// kernels give the same bits as each other.
//
// Tile: static constexpr int64_t MR, NR, static constexpr bool kPackA, and static functions (the file's noinline, target-attributed
// kernels; this driver has no intrinsics, so it needs no target attribute):
//   pack_b(b, k0, kc, j0, nr, bp)                  bp (kc, NR) = op(b)[k0 : k0 + kc, j0 : j0 + nr], zero padded
//   pack_a(a, i0, mr, k0, kc, ap)                  ap (kc, MR) = op(a)[i0 : i0 + mr, k0 : k0 + kc]^T, zero padded
//                                                  (mr < MR only, unless kPackA)
//   rows(kc, a, lda, bp, c, ldc, nr, alpha, beta)  MR whole rows of a row-major a, read in place (!kPackA only)
//   columns(kc, a, k_step, bp, c, ldc, mr, nr, alpha, beta)
//                                                  mr values of a per k, contiguous, k_step floats apart
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/scratch.hpp"

namespace trlhpc::cpu::gemm_blocked {

struct Operand {
  const float* p;
  int64_t ld;
  bool trans;
};

// KC 256 -> 384 -> 512 measured +8-12 % at hidden 896 (fewer passes over c mattered more than keeping a
// b-panel in L1).
constexpr int64_t kKC = 512, kMC = 144, kNC = 3072;
constexpr int64_t kTasksPerThread = 4;  // enough tasks of equal size that the last one ends the others' wait

template <class Tile>
void gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N, int64_t K,
          float alpha, float beta) {
  constexpr int64_t kMR = Tile::MR, kNR = Tile::NR;
  static_assert(kMC % kMR == 0, "a row block holds whole register tiles");
  // Packing buffers kept across calls (scratch.hpp): fresh pages on every matmul would page-fault a few
  // MB per call. b's is the calling thread's, shared by the team; a's is each thread's own.
  thread_local Scratch b_buffer, a_buffer;
  const Operand A{a, trans_a ? M : K, trans_a}, B{b, trans_b ? K : N, trans_b};
  float* bpack = b_buffer.reserve(kKC * kNC);
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), (M * N + 4095) / 4096 + 1));
#pragma omp parallel num_threads(threads)
  {
    float* apack = a_buffer.reserve(kMC * kKC);
    for (int64_t jc = 0; jc < N; jc += kNC) {
      const int64_t nc = std::min(kNC, N - jc), panels = (nc + kNR - 1) / kNR;
      const int64_t k_blocks = (K + kKC - 1) / kKC, k_step = (K + k_blocks - 1) / k_blocks;
      for (int64_t pc = 0; pc < K; pc += k_step) {
        const int64_t kc = std::min(k_step, K - pc);
        const float beta_block = pc == 0 ? beta : 1.0f;
#pragma omp for schedule(static)
        for (int64_t p = 0; p < panels; ++p)
          Tile::pack_b(B, pc, kc, jc + p * kNR, std::min(kNR, nc - p * kNR), bpack + p * kKC * kNR);
        // Row blocks of equal height (a multiple of kMR), column runs of equal width; columns are split
        // too when there are few row blocks (weight gradients of small layers: M = 128 or 384), so that
        // every thread has work.
        const int64_t row_blocks = (M + kMC - 1) / kMC;
        const int64_t block_rows = ((M + row_blocks - 1) / row_blocks + kMR - 1) / kMR * kMR;
        const int64_t want_col_tasks = std::max<int64_t>(1, (kTasksPerThread * threads + row_blocks - 1) / row_blocks);
        const int64_t task_panels = (panels + std::min(want_col_tasks, panels) - 1) / std::min(want_col_tasks, panels);
        const int64_t col_tasks = (panels + task_panels - 1) / task_panels;
        int64_t packed_rows = -1;  // the row block whose partial panel apack holds
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < row_blocks * col_tasks; ++task) {
          const int64_t ib = task / col_tasks, ct = task % col_tasks;
          const int64_t i0 = ib * block_rows, mc = std::min(block_rows, M - i0);
          if (mc <= 0) continue;
          // Reading past row/column M is not allowed: the last partial panel is packed.
          if (packed_rows != ib) {
            if constexpr (Tile::kPackA) {
              for (int64_t ir = 0; ir < mc; ir += kMR)
                Tile::pack_a(A, i0 + ir, std::min(kMR, mc - ir), pc, kc, apack + ir * kKC);
            } else if (mc % kMR) {
              Tile::pack_a(A, i0 + mc / kMR * kMR, mc % kMR, pc, kc, apack + mc / kMR * kMR * kKC);
            }
            packed_rows = ib;
          }
          const int64_t p1 = std::min(panels, (ct + 1) * task_panels);
          for (int64_t p = ct * task_panels; p < p1; ++p) {
            const int64_t j0 = p * kNR, nr = std::min(kNR, nc - j0);
            const float* bp = bpack + p * kKC * kNR;
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              float* c_tile = c + (i0 + ir) * N + jc + j0;
              const int64_t mr = std::min(kMR, mc - ir);
              if constexpr (Tile::kPackA) {
                Tile::columns(kc, apack + ir * kKC, kMR, bp, c_tile, N, mr, nr, alpha, beta_block);
              } else if (mr == kMR && !A.trans) {
                Tile::rows(kc, A.p + (i0 + ir) * A.ld + pc, A.ld, bp, c_tile, N, nr, alpha, beta_block);
              } else if (mr == kMR) {
                Tile::columns(kc, A.p + pc * A.ld + i0 + ir, A.ld, bp, c_tile, N, kMR, nr, alpha, beta_block);
              } else {
                Tile::columns(kc, apack + ir * kKC, kMR, bp, c_tile, N, mr, nr, alpha, beta_block);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace trlhpc::cpu::gemm_blocked
