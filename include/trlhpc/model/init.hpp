#pragma once
// Deterministic random initialisation for a model built from --model_config.
//
// Every element is a pure function of (seed, parameter name, global flat element index), so any rank
// can initialise exactly the slice it owns (an fsdp shard, a tp slice, a row range) and get the same
// bits as a full single-process init: every layout starts from identical weights.
//
// Generator (counter-based, as in Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
//   key     = splitmix64(fnv1a64(name) ^ splitmix64(seed))           (64-bit Philox key)
//   bits    = Philox4x32-10(counter = (index_lo, index_hi, 0, 0), key)  (128 random bits)
//   u1, u2  = two 53-bit uniforms from the bits, u1 in (0, 1], u2 in [0, 1)
//   z       = sqrt(-2 ln u1) * cos(2 pi u2)                          (Box-Muller, cosine branch only)
// Values, as transformers' _init_weights: matrices and embeddings ~ normal(0, initializer_range)
// (the embedding row pad_token_id, when set, is zero), norm weights = 1 (0 for Gemma's (1 + w) norms),
// biases = 0.
#include <cstdint>
#include <string_view>
#include <vector>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {

// 64-bit FNV-1a hash of a string (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(std::string_view text);
// The Philox key of a parameter's stream.
uint64_t init_stream_key(std::string_view parameter_name, uint64_t seed);
// Standard normal number `index` of the stream `key`.
double init_standard_normal(uint64_t key, uint64_t index);
// Uniform number `index` of the stream `key` in [0, 1) (53 bits of the same Philox block).
double init_uniform(uint64_t key, uint64_t index);

// Writes elements [begin, end) of the flat (row-major) initial value of `spec` to out[0 .. end-begin).
// 0 <= begin <= end <= spec.numel(). Multithreaded with OpenMP; the result does not depend on threads.
void init_parameter_range(const ModelConfig& config, const ParameterSpec& spec, uint64_t seed, int64_t begin,
                          int64_t end, float* out);
// The whole parameter: out has spec.numel() floats.
void init_parameter(const ModelConfig& config, const ParameterSpec& spec, uint64_t seed, float* out);

// Elements [begin, end) of the concatenation of `specs` (in order, no gaps) to out[0 .. end-begin).
// Indices past the total (padding of a flat buffer) are set to 0. Lets a rank fill its shard of a flat
// per-unit buffer directly: init_flat_range(config, unit_parameter_specs(config, u), seed, b, e, out).
void init_flat_range(const ModelConfig& config, const std::vector<ParameterSpec>& specs, uint64_t seed,
                     int64_t begin, int64_t end, float* out);

}  // namespace trlhpc
