#pragma once
// TRLHPC_CHECK_HDF5: HDF5 calls return a negative value on failure; this turns one into a RuntimeFailure
// naming the call and the innermost message of HDF5's error stack. Only parallel_hdf5.cpp calls HDF5.
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

// HDF5: the error stack's innermost message.
std::string hdf5_error_string();

}  // namespace trlhpc

#define TRLHPC_CHECK_HDF5(expr)                                                                     \
  ([&]() {                                                                                          \
    auto trlhpc_rc_ = (expr);                                                                       \
    if (trlhpc_rc_ < 0)                                                                             \
      ::trlhpc::throw_runtime_failure("HDF5", #expr, ::trlhpc::hdf5_error_string(), __FILE__,       \
                                      __LINE__);                                                    \
    return trlhpc_rc_;                                                                              \
  }())
