#pragma once
// An HDF5 file laid out ahead of its data, for writers that are not HDF5: one process creates the file
// and its 1-D datasets with serial HDF5 (contiguous layout, space allocated at creation, never filled),
// learns where each dataset's data lies in the file and closes it; any number of processes (checkpoint
// writers on every rank and node) then write the data bytes straight into those regions
// (io/file_region_writer.hpp). The result is an ordinary HDF5 file (h5py, h5dump and ParallelHdf5File
// read it): HDF5 never looks at a contiguous dataset's data bytes except to read them.
//
// Why (bench/RESULTS.md "Cross-node checkpoint save"): opening, creating datasets in and closing one
// file through MPI-IO costs ~20 collective round trips, which across nodes made a checkpoint save 7x
// slower than on one node; this costs none, the ranks only need the offsets (one broadcast).
//
// Serial HDF5 only, no MPI: it sits in `parallel` because that area is the one that links HDF5.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace trlhpc {

struct Hdf5PlannedDataset {
  enum class Type { Float32, Byte };  // float32 little-endian / unsigned 8-bit (text)
  std::string name;                   // "a/b": intermediate groups are created
  int64_t elements = 0;               // > 0
  Type type = Type::Float32;
};

// Creates (truncates) `path` holding `datasets` and returns each one's byte offset in the file, in the
// same order; the file is closed (and its size covers every dataset, the data regions sparse until
// written) when it returns. RuntimeFailure naming the path and HDF5's reason when it cannot.
std::vector<int64_t> create_preallocated_hdf5(const std::string& path, std::span<const Hdf5PlannedDataset> datasets);

}  // namespace trlhpc
