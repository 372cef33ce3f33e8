// mpi_error_string (declared in core/error.hpp for TRLHPC_CHECK_MPI): defined here because MPI calls
// belong to runtime/ and parallel/ only.
#include <mpi.h>

#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

std::string mpi_error_string(int code) {
  char buffer[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, buffer, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(buffer, static_cast<size_t>(length));
}

}  // namespace trlhpc
