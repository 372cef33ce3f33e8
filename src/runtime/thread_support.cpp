#include "trlhpc/runtime/thread_support.hpp"

#include <mpi.h>

namespace trlhpc {

MpiThreadSupport mpi_thread_support() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  const char* name = level == MPI_THREAD_MULTIPLE     ? "MPI_THREAD_MULTIPLE"
                     : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                     : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
                                                      : "MPI_THREAD_SINGLE";
  return {level >= MPI_THREAD_MULTIPLE, name};
}

}  // namespace trlhpc
