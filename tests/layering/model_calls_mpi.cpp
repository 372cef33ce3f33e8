// Layering probe (tests/layering/test_layering.sh): code placed in the `model` area that calls MPI
// directly; MPI belongs to runtime/ and parallel/ only.
#include <mpi.h>

namespace trlhpc::layering_probe {
int model_calls_mpi() { return MPI_Barrier(MPI_COMM_WORLD); }
}  // namespace trlhpc::layering_probe
