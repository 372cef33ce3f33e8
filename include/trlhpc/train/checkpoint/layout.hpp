#pragma once
// Where a rank's elements of a parameter lie in its checkpoint dataset. Datasets hold the GLOBAL
// (Hugging Face) shape of each tensor; a rank holds a tp-local slice (tp_layout.hpp) of which it owns
// the elements of its optimizer range (the whole unit, or a ZeRO shard). This maps a range of the
// local tensor's flat elements to rectangles of the global tensor viewed as (R, C) (1-D: R = 1), in
// the order HDF5 iterates them: ascending global position, which is also the local order (tp slices
// keep the row-major order of the full tensor).
//
// Worked example: o_proj (C, NH*HS) = (4, 8) row-parallel over tp 2, rank 1 holds columns 4..7 as a
// local (4, 4); local elements [2, 14) = local (0,2)..(3,1) -> global rows 0..3:
//   {row 0, col 6, 1 x 2}, {row 1, col 4, 2 x 4} (rows 1-2 merged), {row 3, col 4, 1 x 2}.
//
// Format 2 stores the tensors of a unit one after another in one 1-D dataset (state.hpp); there a
// rectangle becomes a slab at the tensor's offset. The same example with o_proj from element 100:
//   {106, 2, 1, 2}, {112, 8, 2, 4}, {128, 2, 1, 2}    (one run: count 1, stride = block)
// and a ZeRO shard of an unsplit tensor (local = global), elements [2, 14) of a (4, 4) from 100:
// rectangles {0,2,1x2}, {1,0,2x4}, {3,0,1x2} are one contiguous run, slab {102, 12, 1, 12}.
#include <cstdint>
#include <span>
#include <vector>

#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/model/tp_layout.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"

namespace trlhpc::checkpoint {

// The dataset shape of a tp-local parameter: its full shape.
Shape dataset_shape(const ParameterSpec& local, int tp_size);

// Rectangles of the full tensor holding local flat elements [begin, end) of tp rank `tp`'s slice,
// ascending; consecutive rows with the same columns are merged into one rectangle.
std::vector<Hdf5Block> global_blocks(const ParameterSpec& local, TpLayout tp, int64_t begin, int64_t end);

// Appends `blocks` (ascending rectangles of a C-column tensor stored row-major from element `base` of a
// 1-D dataset) to `slabs` as slabs, joining a slab to the previous one when both are contiguous runs and
// it starts where the previous ends (the pieces of a ZeRO shard, the tensors of a unit one after another).
void append_slabs(std::span<const Hdf5Block> blocks, int64_t C, int64_t base, std::vector<Hdf5Slab>& slabs);

}  // namespace trlhpc::checkpoint
