#pragma once
// MpiBf16Ops: the MPI reduction operators for bf16 (stored as uint16_t), which MPI lacks. Each element
// is widened to fp32, combined, and rounded back to nearest even, as a bf16 GPU reduction would.
// Owned (MPI_Op_create / MPI_Op_free) by the MpiCommunicator that uses them: no process-wide state.
#include <mpi.h>

#include <array>

#include "trlhpc/comm/comm_types.hpp"

namespace trlhpc {

class MpiBf16Ops {
 public:
  MpiBf16Ops();
  ~MpiBf16Ops();
  MpiBf16Ops(const MpiBf16Ops&) = delete;
  MpiBf16Ops& operator=(const MpiBf16Ops&) = delete;

  MPI_Op get(ReduceOp op) const { return ops_[static_cast<size_t>(op)]; }

 private:
  std::array<MPI_Op, 3> ops_{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // indexed by ReduceOp
};

}  // namespace trlhpc
