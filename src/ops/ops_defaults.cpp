// Default bodies of the optional Ops methods: a backend that lacks one fails loudly, naming the op,
// the first time a feature that needs it (tensor parallelism) runs on it. The host-memory methods of
// CPU offload default to the CPU backend's (host tensors, memcpy); CudaOps overrides them.
#include <cstring>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {
[[noreturn]] void missing(Device device, const char* op) {
  throw RuntimeFailure(std::string("Ops::") + op + " is not implemented by the " +
                       (device == Device::CPU ? "cpu" : "cuda") + " backend (needed by tensor parallelism, tp_size > 1)");
}
void expect_same_bytes(const Tensor& a, const Tensor& b, const char* op) {
  TRLHPC_ASSERT(a.nbytes() == b.nbytes(), std::string(op) + ": " + shape_string(a.shape()) + " and " +
                                              shape_string(b.shape()) + " differ in size");
}
}  // namespace

// The CPU backend's: its device memory is host memory, so the host side is an ordinary host tensor
// and the copies are memcpy.
Tensor Ops::allocate_host(const Shape& shape, DType dtype) { return Tensor::host(shape, dtype); }
void Ops::copy_to_host_async(const Tensor& host_dst, const Tensor& src) {
  expect_same_bytes(host_dst, src, "copy_to_host_async");
  if (src.nbytes()) std::memcpy(host_dst.data(), src.data(), src.nbytes());
}
void Ops::copy_from_host_async(const Tensor& dst, const Tensor& host_src) {
  expect_same_bytes(dst, host_src, "copy_from_host_async");
  if (dst.nbytes()) std::memcpy(dst.data(), host_src.data(), dst.nbytes());
}

void Ops::embedding_noise(const Tensor&, const Tensor&, const Tensor&, float, uint64_t) {
  missing(device(), "embedding_noise");
}
void Ops::lora_dropout(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, float, uint64_t) {
  missing(device(), "lora_dropout");
}
namespace {
class ReadyLoss final : public PendingLoss {
 public:
  ReadyLoss(double loss, const TokenMetrics& metrics) : loss_(loss), metrics_(metrics) {}
  double wait(TokenMetrics* metrics) override {
    if (metrics) *metrics = metrics_;
    return loss_;
  }

 private:
  double loss_;
  TokenMetrics metrics_;
};
}  // namespace

std::unique_ptr<PendingLoss> Ops::cross_entropy_deferred(const Tensor& hidden, const Tensor& weight,
                                                         const Tensor& targets, float grad_scale, const Tensor& dhidden,
                                                         const Tensor& dweight, int64_t chunk_tokens,
                                                         int64_t* valid_tokens, bool want_metrics,
                                                         const int32_t* host_targets, float logit_softcap,
                                                         const TokenLoss& token_loss) {
  TokenMetrics metrics;
  const double loss = cross_entropy_fwd_bwd(hidden, weight, targets, grad_scale, dhidden, dweight, chunk_tokens,
                                            valid_tokens, want_metrics ? &metrics : nullptr, host_targets,
                                            logit_softcap, token_loss);
  return std::make_unique<ReadyLoss>(loss, metrics);
}

void Ops::vocab_parallel_ce_max(const Tensor&, const Tensor&) { missing(device(), "vocab_parallel_ce_max"); }
void Ops::vocab_parallel_ce_sums(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&) {
  missing(device(), "vocab_parallel_ce_sums");
}
bool Ops::vocab_parallel_ce_metrics(const Tensor&, const Tensor&, int64_t, int64_t, const Tensor&, const Tensor&) {
  return false;
}
void Ops::vocab_parallel_ce_grad(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&, float, float) {
  missing(device(), "vocab_parallel_ce_grad");
}
void Ops::vocab_parallel_ce_logit_sums(const Tensor&, const Tensor&, const Tensor&) {
  missing(device(), "vocab_parallel_ce_logit_sums");
}
void Ops::vocab_parallel_ce_shaped_grad(const Tensor&, const Tensor&, int64_t, int64_t, const Tensor&, const Tensor&,
                                        float, float, const TokenLoss&) {
  missing(device(), "vocab_parallel_ce_shaped_grad");
}

}  // namespace trlhpc
