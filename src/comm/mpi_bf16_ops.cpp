#include "trlhpc/comm/mpi_bf16_ops.hpp"

#include <algorithm>
#include <cstdint>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/dtype.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

namespace {
// MPI_User_function: inout[i] = combine(in[i], inout[i]) over *len elements of MPI_UINT16_T.
template <class Combine>
void bf16_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(Combine{}(bf16_to_f32(a[i]), bf16_to_f32(b[i])));
}
struct Add { float operator()(float x, float y) const { return x + y; } };
struct Max { float operator()(float x, float y) const { return std::max(x, y); } };
struct Min { float operator()(float x, float y) const { return std::min(x, y); } };
}  // namespace

MpiBf16Ops::MpiBf16Ops() {
  TRLHPC_CHECK_MPI(MPI_Op_create(&bf16_reduce<Add>, 1, &ops_[static_cast<size_t>(ReduceOp::Sum)]));
  TRLHPC_CHECK_MPI(MPI_Op_create(&bf16_reduce<Max>, 1, &ops_[static_cast<size_t>(ReduceOp::Max)]));
  TRLHPC_CHECK_MPI(MPI_Op_create(&bf16_reduce<Min>, 1, &ops_[static_cast<size_t>(ReduceOp::Min)]));
}

MpiBf16Ops::~MpiBf16Ops() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& op : ops_)
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
}

}  // namespace trlhpc
