// GoogleTest main for tests run under mpirun: every rank runs every test; at the end the number of
// failed tests is all-reduced so every rank exits with the same verdict (one bad rank fails all), and
// only rank 0 prints the full report (others print failures only). --cpu_gemm / --cpu_bf16_gemm choose
// the GEMM engines (kernel_choice.hpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "kernel_choice.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

namespace {
// Ranks > 0 print only their failures, prefixed with the rank, instead of the full report.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  trlhpc::testing::choose_kernels_from_args(argc, argv);
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(mpi.world_rank()));
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int failed_ranks = 0;
  MPI_Allreduce(&local_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0 && failed_ranks)
    std::fprintf(stderr, "%d of %d ranks had failing tests\n", failed_ranks, mpi.world_size());
  return failed_ranks ? 1 : 0;
}
