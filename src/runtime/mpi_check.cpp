#include "trlhpc/runtime/mpi_check.hpp"

#include <mpi.h>

namespace trlhpc {

std::string mpi_error_string(int code) {
  char buffer[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, buffer, &length) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(buffer, static_cast<size_t>(length));
}

}  // namespace trlhpc
