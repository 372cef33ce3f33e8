// Default bodies of the optional Ops methods: a backend that lacks one fails loudly, naming the op,
// the first time a feature that needs it (tensor parallelism) runs on it.
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {
[[noreturn]] void missing(Device device, const char* op) {
  throw RuntimeFailure(std::string("Ops::") + op + " is not implemented by the " +
                       (device == Device::CPU ? "cpu" : "cuda") + " backend (needed by tensor parallelism, tp_size > 1)");
}
}  // namespace

void Ops::lora_dropout(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, float, uint64_t) {
  missing(device(), "lora_dropout");
}
void Ops::vocab_parallel_ce_max(const Tensor&, const Tensor&) { missing(device(), "vocab_parallel_ce_max"); }
void Ops::vocab_parallel_ce_sums(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&) {
  missing(device(), "vocab_parallel_ce_sums");
}
bool Ops::vocab_parallel_ce_metrics(const Tensor&, const Tensor&, int64_t, int64_t, const Tensor&, const Tensor&) {
  return false;
}
void Ops::vocab_parallel_ce_grad(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&, float) {
  missing(device(), "vocab_parallel_ce_grad");
}

}  // namespace trlhpc
