// Sums whose bits do not depend on the CPU the binary was built for or runs on.
//
// `#pragma omp simd reduction(+ : s)` lets the compiler split a sum into as many partial sums as its
// vector is wide: 8 floats under 256-bit tuning (AVX2 machines, GCC's Rocket Lake / Sapphire Rapids
// tuning), 16 under 512-bit (Zen 4), and the order of the additions changed with it. The same source
// then gave last-bit differences between a Zen 4 and a Xeon build from step 1 on (the format-1
// checkpoint fixture, written on one, failed its bit-identity check on the other), and would let
// replicated computations (norms on every tp rank) drift apart on a cluster of mixed CPUs.
//
// lane_sum fixes the split instead: kLanes partial sums, term i into lane i % kLanes in increasing i,
// then a pairwise tree in a fixed order. The compiler may vectorise the lane loop at any width (one
// 512-bit or two 256-bit registers per 16 lanes): each lane's chain of additions is the same. A term
// may have side effects on its own element (the loss writes exp(z) while summing it).
#pragma once

#include <cstdint>

namespace trlhpc::cpu {

inline constexpr int64_t kSumLanes = 16;

// sum_{i < n} term(i), with Acc the accumulator type (float or double) and term(i) -> Acc.
template <class Acc, class Term>
inline Acc lane_sum(int64_t n, Term term) {
  Acc lanes[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kSumLanes; ++l) lanes[l] += term(i + l);
  }
  for (int64_t l = 0; i + l < n; ++l) lanes[l] += term(i + l);
  for (int64_t width = kSumLanes / 2; width > 0; width /= 2)
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

}  // namespace trlhpc::cpu
