// NEFTune's noise on the input embeddings (see cpu.hpp and model/neftune.hpp): additive, so the
// embedding gradient is unchanged; each element's draw is a pure function of where it comes from.
#include "trlhpc/core/philox.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

void embedding_noise(float* x, const int32_t* rows, const int32_t* columns, int64_t N, int64_t C, float magnitude,
                     uint64_t key) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    if (rows[n] < 0) continue;  // padding
    float* xr = x + n * C;  // (C)
    for (int64_t c = 0; c < C; ++c) xr[c] += magnitude * neftune_unit_noise(key, rows[n], columns[n], c);
  }
}

}  // namespace trlhpc::cpu
