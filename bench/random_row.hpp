#pragma once
// One training row of random tokens for the benchmarks that drive a Trainer directly (no dataset).
#include <cstdint>
#include <random>

#include "trlhpc/data/batch.hpp"

namespace trlhpc::bench {

// `seq` uniform random token ids below `vocab`, one document, trained on every position but the last.
inline Batch random_row(int64_t seq, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  Batch b;
  b.rows = 1;
  b.seq_len = seq;
  for (int64_t t = 0; t < seq; ++t) {
    b.input_ids.push_back(token(rng));
    b.positions.push_back(static_cast<int32_t>(t));
    b.doc_ids.push_back(0);
  }
  for (int64_t t = 0; t < seq; ++t) b.targets.push_back(t + 1 < seq ? b.input_ids[static_cast<size_t>(t + 1)] : kIgnoreIndex);
  return b;
}

}  // namespace trlhpc::bench
