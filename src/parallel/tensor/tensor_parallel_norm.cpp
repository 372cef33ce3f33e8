#include "src/parallel/tensor/tensor_parallel_norm.hpp"

#include <algorithm>

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

double tp_counted_sum_of_squares(Ops& ops, const ParameterUnit& unit, int64_t begin, const Tensor& data, int tp_rank) {
  if (tp_rank == 0) return ops.sum_of_squares(data);  // tp rank 0 counts the replicated slots too
  const int64_t end = begin + data.numel();
  double total = 0;
  for (const ParameterSlot& slot : unit.slots) {
    if (!slot.spec.tp_counted_on(tp_rank)) continue;
    const int64_t lo = std::max(begin, slot.offset), hi = std::min(end, slot.offset + slot.numel);
    if (lo < hi) total += ops.sum_of_squares(data.view({hi - lo}, lo - begin));
  }
  return total;
}

}  // namespace trlhpc
