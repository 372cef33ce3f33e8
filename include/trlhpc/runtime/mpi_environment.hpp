#pragma once
// RAII MPI environment: MPI_Init_thread on construction, MPI_Finalize on scope exit. It asks for
// MPI_THREAD_MULTIPLE (the asynchronous checkpoint writer and the communication progress thread
// talk MPI from a second thread) and accepts
// FUNNELED (what OpenMP compute threads need); --async_save refuses to run below MULTIPLE. MPI_COMM_WORLD is switched to MPI_ERRORS_RETURN so failures surface as RuntimeFailure.
// Works launched bare (singleton MPI), under mpirun and under srun (OpenMPI's PMIx).
//
// If the process is unwinding because of an uncaught exception in a multi-rank job, the destructor
// calls MPI_Abort instead of MPI_Finalize: a rank that died must not leave the others waiting in a
// collective forever.
#include <mpi.h>

#include <string>

namespace trlhpc {

class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int thread_level() const { return thread_level_; }
  const std::string& host() const { return host_; }
  // Started by a launcher (mpirun, srun, a PMI/PMIx one) rather than bare: the launcher then owns the
  // terminal. Open MPI hands each rank a pseudo-terminal even when mpirun's own output is a file, so
  // isatty() on a rank cannot tell a user's terminal from a redirected log.
  bool under_launcher() const { return under_launcher_; }
  // The job's world communicator, to build ProcessGroups from (which duplicate it: trlhpc never
  // communicates on it directly). Out of line: MPI_COMM_WORLD is an MPI library symbol, and only
  // runtime/ and parallel/ may reference those (docs/ARCHITECTURE.md "Layering").
  MPI_Comm world() const;

  // Abort every rank with `exit_code` (used by the CLI after printing an error that not all ranks saw).
  [[noreturn]] void abort(int exit_code) const;

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  int thread_level_ = 0;
  std::string host_;
  bool owns_mpi_ = false;
  bool under_launcher_ = false;
  int uncaught_at_start_ = 0;
};

}  // namespace trlhpc
