#include "trlhpc/optim/adamw.hpp"

#include <algorithm>

#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc {

AdamW::AdamW(const ParameterStore& store, std::vector<OptimizerRange> ranges, AdamWConfig config, Ops& ops,
             OptimizerHome home)
    : ranges_(std::move(ranges)), config_(config), ops_(ops), home_(home) {
  TRLHPC_ASSERT(static_cast<int>(ranges_.size()) == store.num_units(), "one optimizer range per unit");
  for (int u = 0; u < store.num_units(); ++u) {
    const OptimizerRange r = ranges_[static_cast<size_t>(u)];
    const bool host = home == OptimizerHome::Host;  // allocate_host memory is zero-filled
    m_.push_back(host ? ops.allocate_host({r.end - r.begin}) : ops.zeros({r.end - r.begin}));
    v_.push_back(host ? ops.allocate_host({r.end - r.begin}) : ops.zeros({r.end - r.begin}));
    for (const ParameterSlot& slot : store.unit(u).slots) {
      const int64_t lo = std::max(r.begin, slot.offset), hi = std::min(r.end, slot.offset + slot.numel);
      if (lo >= hi) continue;
      const bool decay = slot.spec.weight_decay();
      segments_.push_back({u, lo - r.begin, hi - lo, decay});
    }
  }
}

void AdamW::step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, float lr,
                 const std::vector<Tensor>& compute) {
  ++step_;
  TRLHPC_ASSERT(compute.empty() || compute.size() == params.size(), "AdamW: one compute copy (or none) per unit");
  TRLHPC_ASSERT(home_ == OptimizerHome::Device ||
                    std::none_of(compute.begin(), compute.end(), [](const Tensor& t) { return t.data() != nullptr; }),
                "AdamW: compute copies only with device state");
  if (home_ == OptimizerHome::Host)
    for (size_t u = 0; u < params.size(); ++u)
      TRLHPC_ASSERT(params[u].device() == Device::CPU && grads[u].device() == Device::CPU,
                    "AdamW with host state needs host parameters and gradients (unit " + std::to_string(u) + ")");
  for (const Segment& s : segments_) {
    const size_t u = static_cast<size_t>(s.unit);
    AdamWHyper h{lr, config_.beta1, config_.beta2, config_.eps, s.decay ? config_.weight_decay : 0.0f, step_};
    if (home_ == OptimizerHome::Host) {  // the CPU AdamW kernel on the offloaded state
      cpu::adamw_step(params[u].f32() + s.offset, grads[u].f32() + s.offset, m_[u].f32() + s.offset,
                      v_[u].f32() + s.offset, s.numel, h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
      continue;
    }
    const bool copy = !compute.empty() && compute[u].data();
    ops_.adamw_step(params[u].view({s.numel}, s.offset), grads[u].view({s.numel}, s.offset),
                    m_[u].view({s.numel}, s.offset), v_[u].view({s.numel}, s.offset), h,
                    copy ? compute[u].view({s.numel}, s.offset) : Tensor());
  }
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (size_t u = 0; u < m_.size(); ++u) bytes += static_cast<int64_t>(m_[u].nbytes() + v_[u].nbytes());
  return bytes;
}

}  // namespace trlhpc
