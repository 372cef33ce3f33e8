#pragma once
// MpiComm: a move-only owner of one MPI communicator. The destructor calls MPI_Comm_free (skipped when
// MPI is already finalized, so a handle that outlives MpiEnvironment does no harm). Every communicator
// it creates gets MPI_ERRORS_RETURN, so failures reach TRLHPC_CHECK_MPI instead of aborting silently.
//
// The library never communicates on MPI_COMM_WORLD itself: ProcessGroups duplicates it, so trlhpc's
// traffic cannot match messages of an application that embeds it.
#include <mpi.h>

namespace trlhpc {

class MpiComm {
 public:
  MpiComm() = default;  // holds MPI_COMM_NULL
  ~MpiComm();
  MpiComm(MpiComm&& other) noexcept;
  MpiComm& operator=(MpiComm&& other) noexcept;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  // Collective over `parent`.
  static MpiComm duplicate(MPI_Comm parent);
  // MPI_Comm_split: ranks with equal `color` form one communicator, ordered by `key`.
  static MpiComm split(MPI_Comm parent, int color, int key);
  // Ranks that share memory (one node), ordered by their rank in `parent`.
  static MpiComm split_shared(MPI_Comm parent);

  MPI_Comm get() const { return comm_; }
  bool valid() const { return comm_ != MPI_COMM_NULL; }
  int rank() const;
  int size() const;

 private:
  explicit MpiComm(MPI_Comm comm);
  void reset() noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace trlhpc
