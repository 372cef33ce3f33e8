// LoRA dropout on the adapters' input (see cpu.hpp): out = x * keep / (1 - p), the keep decision a pure
// function of where the element comes from (core/philox.hpp), so every layout and a recomputation draw
// the same mask.
#include "trlhpc/core/philox.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

void lora_dropout(const float* x, float* out, const int32_t* rows, const int32_t* columns, int64_t N, int64_t F,
                  int64_t feature_offset, float p, uint64_t key) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * F;  // (F)
    float* yr = out + n * F;      // (F)
    for (int64_t f = 0; f < F; ++f)
      yr[f] = dropout_keeps(key, rows[n], columns[n], feature_offset + f, p) ? xr[f] * scale : 0.0f;
  }
}

}  // namespace trlhpc::cpu
