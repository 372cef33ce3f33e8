// Token embedding (vocab-parallel aware) for the CPU backend (fp32, OpenMP).
//
// Forward:  out[n, :] = table[ids[n] - vocab_start, :] when vocab_start <= ids[n] < vocab_start + V,
//           else 0. Under tensor parallel each rank holds the vocab slice [vocab_start, vocab_start+V)
//           and the zeros let one all-reduce (sum) assemble the full embedding.
// Backward: dtable[v, :] += sum over n with ids[n] - vocab_start == v of dout[n, :].
//           Determinism: the in-slice tokens are stably sorted by id, so each table row's
//           contributions form one contiguous run that a single thread adds in token order. No two
//           threads touch one row and the sum order never depends on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

void embedding_fwd(const int32_t* ids, const float* table, float* out, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    float* dst = out + n * C;  // (C)
    if (row >= 0 && row < V)
      std::copy(table + row * C, table + (row + 1) * C, dst);
    else
      std::fill(dst, dst + C, 0.0f);
  }
}

void embedding_bwd(const int32_t* ids, const float* dout, float* dtable, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start) {
  // Token indices whose id falls in this rank's slice, stably sorted by id: (n_valid)
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    if (row >= 0 && row < V) order.push_back(n);
  }
  std::stable_sort(order.begin(), order.end(), [ids](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  // Start of each run of equal ids in `order`, plus the end sentinel: (runs + 1)
  std::vector<int64_t> run_start;
  for (size_t i = 0; i < order.size(); ++i)
    if (i == 0 || ids[order[i]] != ids[order[i - 1]]) run_start.push_back(static_cast<int64_t>(i));
  run_start.push_back(static_cast<int64_t>(order.size()));
  const int64_t runs = static_cast<int64_t>(run_start.size()) - 1;

#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t first = run_start[static_cast<size_t>(r)], last = run_start[static_cast<size_t>(r) + 1];
    float* dst = dtable + (static_cast<int64_t>(ids[order[static_cast<size_t>(first)]]) - vocab_start) * C;  // (C)
    for (int64_t i = first; i < last; ++i) {
      const float* src = dout + order[static_cast<size_t>(i)] * C;  // (C)
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace trlhpc::cpu
