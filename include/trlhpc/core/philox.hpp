#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; Random123's
// constants): 128 random bits as a pure function of a 128-bit counter and a 64-bit key. Shared by the
// parameter initialiser (model/init) and LoRA dropout (CPU and CUDA kernels), so it compiles for the
// host and, under nvcc, for the device.
#include <cstdint>

#if defined(__CUDACC__)
#define TRLHPC_HOST_DEVICE __host__ __device__
#else
#define TRLHPC_HOST_DEVICE
#endif

namespace trlhpc {

struct Philox4x32 {
  uint32_t v[4];
};

TRLHPC_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint64_t key64) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    c[0] = next[0], c[1] = next[1], c[2] = next[2], c[3] = next[3];
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return counter;
}

// LoRA dropout's keep decision for the input element (source row, source column, feature) of one
// module's dropout stream `key`: kept with probability 1 - p, from the first 32 bits of its Philox block.
TRLHPC_HOST_DEVICE inline bool dropout_keeps(uint64_t key, int32_t row, int32_t column, int64_t feature, float p) {
  const Philox4x32 bits = philox4x32_10(
      {{static_cast<uint32_t>(row), static_cast<uint32_t>(column), static_cast<uint32_t>(feature),
        static_cast<uint32_t>(feature >> 32)}},
      key);
  return static_cast<float>(bits.v[0]) * 0x1.0p-32f >= p;
}

// NEFTune's noise factor for the embedding element (source row, source column, feature) of one step's
// stream `key`: uniform on [-1, 1) in steps of 2^-23, from the top 24 bits u of the first word of its
// Philox block (2 u / 2^24 - 1, exact in fp32, so never 1 and never rounded up to it).
TRLHPC_HOST_DEVICE inline float neftune_unit_noise(uint64_t key, int32_t row, int32_t column, int64_t feature) {
  const Philox4x32 bits = philox4x32_10(
      {{static_cast<uint32_t>(row), static_cast<uint32_t>(column), static_cast<uint32_t>(feature),
        static_cast<uint32_t>(feature >> 32)}},
      key);
  return static_cast<float>(bits.v[0] >> 8) * 0x1.0p-23f - 1.0f;
}

}  // namespace trlhpc
