#include "trlhpc/model/init.hpp"

#include <algorithm>
#include <cmath>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/philox.hpp"
#include "trlhpc/core/splitmix64.hpp"

namespace trlhpc {
namespace {

constexpr int64_t kParallelThreshold = 1 << 15;  // elements below which threads cost more than they save

}  // namespace

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t init_stream_key(std::string_view parameter_name, uint64_t seed) {
  return splitmix64(fnv1a64(parameter_name) ^ splitmix64(seed));
}

double init_standard_normal(uint64_t key, uint64_t index) {
  const Philox4x32 bits =
      philox4x32_10({{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}}, key);
  const uint64_t a = (static_cast<uint64_t>(bits.v[0]) << 32 | bits.v[1]) >> 11;  // 53 bits
  const uint64_t b = (static_cast<uint64_t>(bits.v[2]) << 32 | bits.v[3]) >> 11;
  const double u1 = (static_cast<double>(a) + 1.0) * 0x1.0p-53;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(b) * 0x1.0p-53;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double init_uniform(uint64_t key, uint64_t index) {
  const Philox4x32 bits =
      philox4x32_10({{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}}, key);
  return static_cast<double>((static_cast<uint64_t>(bits.v[0]) << 32 | bits.v[1]) >> 11) * 0x1.0p-53;
}

void init_parameter_range(const ModelConfig& config, const ParameterSpec& spec, uint64_t seed, int64_t begin,
                          int64_t end, float* out) {
  TRLHPC_ASSERT(0 <= begin && begin <= end && end <= spec.numel(),
                "init range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside " + spec.name +
                    " of " + std::to_string(spec.numel()) + " elements");
  const int64_t count = end - begin;
  if (spec.kind == ParameterKind::Norm) {  // Gemma's (1 + w) norms store offsets: zeros (Gemma3RMSNorm)
    std::fill(out, out + count, config.norm_weight_offset ? 0.0f : 1.0f);
    return;
  }
  if (spec.kind == ParameterKind::Bias) {
    std::fill(out, out + count, 0.0f);
    return;
  }
  const uint64_t key = init_stream_key(spec.name, seed);
  const double std_dev = config.initializer_range;
#pragma omp parallel for schedule(static) if (count >= kParallelThreshold)
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(std_dev * init_standard_normal(key, static_cast<uint64_t>(begin + i)));

  // nn.Embedding(padding_idx=pad_token_id): transformers zeroes that row after the normal init.
  if (spec.kind == ParameterKind::Embedding && config.pad_token_id && spec.shape.size() == 2) {
    const int64_t row = *config.pad_token_id, width = spec.shape[1];
    if (row >= 0 && row < spec.shape[0]) {
      const int64_t lo = std::max(begin, row * width), hi = std::min(end, (row + 1) * width);
      for (int64_t e = lo; e < hi; ++e) out[e - begin] = 0.0f;
    }
  }
}

void init_parameter(const ModelConfig& config, const ParameterSpec& spec, uint64_t seed, float* out) {
  init_parameter_range(config, spec, seed, 0, spec.numel(), out);
}

void init_flat_range(const ModelConfig& config, const std::vector<ParameterSpec>& specs, uint64_t seed,
                     int64_t begin, int64_t end, float* out) {
  TRLHPC_ASSERT(0 <= begin && begin <= end, "bad flat init range");
  int64_t offset = 0;  // flat index where the current spec starts
  for (const ParameterSpec& spec : specs) {
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + spec.numel());
    if (lo < hi) init_parameter_range(config, spec, seed, lo - offset, hi - offset, out + (lo - begin));
    offset += spec.numel();
  }
  if (end > offset) std::fill(out + (std::max(begin, offset) - begin), out + (end - begin), 0.0f);
}

}  // namespace trlhpc
