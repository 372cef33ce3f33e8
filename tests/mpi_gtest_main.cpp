// GoogleTest main for tests run under mpirun: every rank runs every test; at the end the number of
// failed tests is all-reduced so every rank exits with the same verdict (one bad rank fails all), and
// only rank 0 prints the full report (others print failures only).
#include <gtest/gtest.h>
#include <mpi.h>

#include "trlhpc/runtime/mpi_environment.hpp"

namespace {
class SilentListener : public ::testing::EmptyTestEventListener {};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Keep failure output on every rank; drop the per-test chatter of ranks > 0.
    listeners.default_result_printer();
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int failed_ranks = 0;
  MPI_Allreduce(&local_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0 && failed_ranks)
    std::fprintf(stderr, "%d of %d ranks had failing tests\n", failed_ranks, mpi.world_size());
  return failed_ranks ? 1 : 0;
}
