#include "trlhpc/runtime/mpi_environment.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_) != MPI_SUCCESS)
      throw RuntimeFailure("MPI_Init_thread failed: check the MPI installation and the launcher");
    owns_mpi_ = true;
  } else {
    MPI_Query_thread(&thread_level_);
  }
  if (thread_level_ < MPI_THREAD_FUNNELED)
    throw RuntimeFailure("the MPI library provides thread level " + std::to_string(thread_level_) +
                         " < MPI_THREAD_FUNNELED, which OpenMP compute threads need");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<size_t>(length));
  set_process_identity(world_rank_, host_);
  uncaught_at_start_ = std::uncaught_exceptions();
  // Each launcher family sets its rank variable in the processes it starts (Open MPI, PMIx, PMI-1/2 as
  // MPICH's hydra, SLURM's srun); a bare singleton has none of them.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) under_launcher_ = true;
}

MPI_Comm MpiEnvironment::world() const { return MPI_COMM_WORLD; }

MpiEnvironment::~MpiEnvironment() {
  if (!owns_mpi_) return;
  if (std::uncaught_exceptions() > uncaught_at_start_ && world_size_ > 1) MPI_Abort(MPI_COMM_WORLD, 2);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiEnvironment::abort(int exit_code) const {
  if (world_size_ > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
  std::_Exit(exit_code);
}

}  // namespace trlhpc
