#pragma once
// TRLHPC_CHECK_HDF5: HDF5 calls return a negative value on failure; this turns one into a RuntimeFailure
// naming the call and the innermost message of HDF5's error stack. Only the parallel area calls HDF5
// (parallel_hdf5.cpp, hdf5_preallocated_file.cpp).
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

// HDF5: the error stack's innermost message.
std::string hdf5_error_string();

// What to say when HDF5 cannot create or open a file: HDF5 1.10.7+ locks the files it opens.
inline constexpr const char* kHdf5LockingHint =
    "On file systems without POSIX locks (some Lustre or NFS mounts) set HDF5_USE_FILE_LOCKING=FALSE";

}  // namespace trlhpc

#define TRLHPC_CHECK_HDF5(expr)                                                                     \
  ([&]() {                                                                                          \
    auto trlhpc_rc_ = (expr);                                                                       \
    if (trlhpc_rc_ < 0)                                                                             \
      ::trlhpc::throw_runtime_failure("HDF5", #expr, ::trlhpc::hdf5_error_string(), __FILE__,       \
                                      __LINE__);                                                    \
    return trlhpc_rc_;                                                                              \
  }())
