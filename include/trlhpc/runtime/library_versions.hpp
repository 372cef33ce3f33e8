#pragma once
// The versions of trlhpc and the libraries this process runs with, for `trlhpc env` and bug reports.
// Local to the calling process (no communication).
#include <string>
#include <vector>

namespace trlhpc {

struct LibraryVersion {
  std::string name;     // "MPI library", "HDF5", ...
  std::string version;  // as the library reports it, one line
};

// trlhpc, compiler, MPI (standard and library), HDF5, OpenBLAS, OpenMP, Boost, nlohmann_json, and in
// CUDA builds CUDA (toolkit, runtime and driver), NCCL and cuDNN.
std::vector<LibraryVersion> library_versions();

}  // namespace trlhpc
