#include "trlhpc/runtime/mpi_comm.hpp"

#include <utility>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  if (comm_ != MPI_COMM_NULL) TRLHPC_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiComm::~MpiComm() { reset(); }

MpiComm::MpiComm(MpiComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

MpiComm& MpiComm::operator=(MpiComm&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

void MpiComm::reset() noexcept {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

MpiComm MpiComm::duplicate(MPI_Comm parent) {
  MPI_Comm comm = MPI_COMM_NULL;
  TRLHPC_CHECK_MPI(MPI_Comm_dup(parent, &comm));
  return MpiComm(comm);
}

MpiComm MpiComm::split(MPI_Comm parent, int color, int key) {
  MPI_Comm comm = MPI_COMM_NULL;
  TRLHPC_CHECK_MPI(MPI_Comm_split(parent, color, key, &comm));
  return MpiComm(comm);
}

MpiComm MpiComm::split_shared(MPI_Comm parent) {
  int parent_rank = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_rank(parent, &parent_rank));
  MPI_Comm comm = MPI_COMM_NULL;
  TRLHPC_CHECK_MPI(MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, parent_rank, MPI_INFO_NULL, &comm));
  return MpiComm(comm);
}

int MpiComm::rank() const {
  int rank = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int MpiComm::size() const {
  int size = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_size(comm_, &size));
  return size;
}

}  // namespace trlhpc
