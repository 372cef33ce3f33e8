#pragma once
// TRLHPC_CHECK_MPI: a failing MPI call becomes a RuntimeFailure naming the call, MPI's error string, the
// file and line. Communicators use MPI_ERRORS_RETURN (mpi_comm.hpp), so the code reaches it. In runtime/
// because MPI is called only from runtime/ and parallel/ (the build's layering checks enforce it).
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

// MPI_Error_string of `code`, or "MPI error code N" when MPI cannot say.
std::string mpi_error_string(int code);

}  // namespace trlhpc

#define TRLHPC_CHECK_MPI(expr)                                                                      \
  do {                                                                                              \
    int trlhpc_rc_ = (expr);                                                                        \
    if (trlhpc_rc_ != 0)                                                                            \
      ::trlhpc::throw_runtime_failure("MPI", #expr, ::trlhpc::mpi_error_string(trlhpc_rc_),         \
                                      __FILE__, __LINE__);                                          \
  } while (0)
