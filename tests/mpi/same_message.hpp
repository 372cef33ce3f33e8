#pragma once
// Bad input must give the same UserError text on every rank (CONTRACT.md): the check every MPI test
// of error paths shares.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

namespace trlhpc::testing {

// Expects `message` on this rank to equal rank 0's of `comm` (a collective over `comm`).
inline void expect_identical_on_every_rank(const std::string& message, MPI_Comm comm = MPI_COMM_WORLD) {
  int length = static_cast<int>(message.size()), rank = 0;
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  MPI_Comm_rank(comm, &rank);
  std::string root = rank == 0 ? message : std::string(static_cast<size_t>(length), '\0');
  if (length > 0) MPI_Bcast(root.data(), length, MPI_CHAR, 0, comm);
  EXPECT_EQ(message, root) << "ranks disagree on the error";
}

}  // namespace trlhpc::testing
