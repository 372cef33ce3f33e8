#pragma once
// Launch grid of the CUDA column reduction (kernels/cuda/column_reduce.cuh), host C++ so it is
// unit-tested without a GPU (tests/unit/test_kernel_column_reduce_grid.cpp).
//
// The partials kernel gives each block 32 columns (grid x) and row blocks of kRowsPerBlock rows
// (grid y). gridDim.y is limited to 65,535, so one launch cannot give every row block its own y index
// beyond 65,535 x 256 = 16.77M rows (docs/CUDA-REVIEW-FIXES.md defect 3): blocks stride over the row blocks
// instead (row block rb is handled by y = rb mod grid_y), so any N runs and the partial of each row
// block, hence the result, is the same whatever the grid.
#include <algorithm>
#include <cstdint>

namespace trlhpc::kernels {

inline constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (and z)

struct ColumnReduceGrid {
  int64_t row_blocks = 0;  // ceil(N / rows_per_block): rows of the partial sums
  int64_t x = 0, y = 0;    // gridDim.x (column groups of 32), gridDim.y (<= kMaxGridY)
};

inline ColumnReduceGrid column_reduce_grid(int64_t N, int64_t C, int64_t rows_per_block) {
  ColumnReduceGrid g;
  if (N <= 0 || C <= 0) return g;
  g.row_blocks = (N + rows_per_block - 1) / rows_per_block;
  g.x = (C + 31) / 32;
  g.y = std::min(g.row_blocks, kMaxGridY);
  return g;
}

}  // namespace trlhpc::kernels
