#include "trlhpc/train/checkpoint/layout.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"

namespace trlhpc::checkpoint {

Shape dataset_shape(const ParameterSpec& local, int tp_size) { return tp_full_shape(local, tp_size); }

std::vector<Hdf5Block> global_blocks(const ParameterSpec& local, TpLayout tp, int64_t begin, int64_t end) {
  const Shape full = dataset_shape(local, tp.size);
  TRLHPC_ASSERT(full.size() == 1 || full.size() == 2, local.name + ": checkpoints hold 1-D and 2-D tensors only");
  const int64_t C = full.back();
  std::vector<Hdf5Block> blocks;
  int64_t next_allowed = 0;  // global runs must ascend (see the header)
  for_each_tp_global_range(local, tp, begin, end, [&](int64_t global_begin, int64_t global_end, int64_t) {
    TRLHPC_ASSERT(global_begin >= next_allowed, local.name + ": tp runs do not ascend");
    next_allowed = global_end;
    for (int64_t at = global_begin; at < global_end;) {
      const Hdf5Block row{at / C, at % C, 1, std::min(global_end - at, C - at % C)};
      at += row.cols;
      Hdf5Block* last = blocks.empty() ? nullptr : &blocks.back();
      if (last && last->col == row.col && last->cols == row.cols && last->row + last->rows == row.row)
        ++last->rows;  // the same columns one row further: one rectangle
      else
        blocks.push_back(row);
    }
  });
  return blocks;
}

void append_slabs(std::span<const Hdf5Block> blocks, int64_t C, int64_t base, std::vector<Hdf5Slab>& slabs) {
  for (const Hdf5Block& b : blocks) {
    // One row, or whole rows: a contiguous run.
    const bool run = b.rows == 1 || b.cols == C;
    Hdf5Slab slab = run ? Hdf5Slab{base + b.row * C + b.col, b.numel(), 1, b.numel()}
                        : Hdf5Slab{base + b.row * C + b.col, C, b.rows, b.cols};
    Hdf5Slab* last = slabs.empty() ? nullptr : &slabs.back();
    if (run && last && last->contiguous() && last->last() + 1 == slab.start) {
      last->block = last->numel() + slab.block;
      last->count = 1;
      last->stride = last->block;
    } else {
      slabs.push_back(slab);
    }
  }
}

}  // namespace trlhpc::checkpoint
