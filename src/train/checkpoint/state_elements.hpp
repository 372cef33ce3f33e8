#pragma once
// What writing (state.cpp) and reading (state_read.cpp) a checkpoint's tensors share: a rank's pieces
// of a unit range and the element checksums (state.hpp).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"

namespace trlhpc::checkpoint {

// One parameter's part of a unit range: unit elements [lo, hi) = the slot's local [lo - offset, hi - offset).
struct Piece {
  const ParameterSlot* slot;
  int64_t lo, hi;
};

inline std::vector<Piece> pieces_of(const ParameterUnit& unit, int64_t begin, int64_t end) {
  std::vector<Piece> pieces;
  for (const ParameterSlot& slot : unit.slots)
    pieces.push_back({&slot, std::clamp(slot.offset, begin, end), std::clamp(slot.offset + slot.numel, begin, end)});
  return pieces;
}

// Rectangles of the full tensor of a piece (layout.hpp), or none when the piece is empty.
inline std::vector<Hdf5Block> blocks_of(const Piece& p, TpLayout tp) {
  if (p.lo >= p.hi) return {};
  return global_blocks(p.slot->spec, tp, p.lo - p.slot->offset, p.hi - p.slot->offset);
}

// Adds the checksum terms of the elements of `blocks` (values in `data`, block order) of a tensor with
// C columns to sums[0..1].
void add_checksum(int64_t* sums, std::span<const Hdf5Block> blocks, int64_t C, std::span<const float> data);

// The 32 hex digits of a checksum's two sums.
std::string checksum_text(const int64_t* sums);

}  // namespace trlhpc::checkpoint
