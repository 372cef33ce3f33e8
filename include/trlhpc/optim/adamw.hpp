#pragma once
// AdamW over the ParameterStore's flat unit buffers (fp32 state; PyTorch torch.optim.AdamW semantics).
//
// Each unit owns the element range [begin, end) of its flat buffer that this rank updates: the whole
// unit without sharding, the rank's shard under ZeRO/FSDP. Moments exist only for that range, so the
// optimizer state shrinks with the shard. Weight decay follows each tensor's kind: none for biases
// and norm weights (CONTRACT.md), applied per tensor slice that falls inside the range.
//
// Where the state lives (OptimizerHome): on the device, stepped by Ops::adamw_step; or on the host
// (CPU offload: DeepSpeed offload_optimizer, FSDP CPUOffload), the moments in Ops::allocate_host
// memory, stepped by the CPU AdamW kernel (cpu::adamw_step, OpenMP) on host parameters and gradients
// (ShardedStateView::owned_params / owned_grads give host tensors then). On the CPU backend both homes
// run the same kernel on the same numbers, so offload changes no bit of training.
#include <cstdint>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

struct AdamWConfig {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};

enum class OptimizerHome { Device, Host };

struct OptimizerRange {
  int64_t begin = 0, end = 0;  // elements of the unit buffer this rank updates
};

class AdamW {
 public:
  // `ranges[u]` is the part of unit u this rank owns; `param_base[u]` / `grad_base[u]` hold exactly
  // those elements (param_base[u][i] is element begin+i of the unit).
  AdamW(const ParameterStore& store, std::vector<OptimizerRange> ranges, AdamWConfig config, Ops& ops,
        OptimizerHome home = OptimizerHome::Device);

  // One step with learning rate lr on the given parameter and gradient spans (one per unit, each
  // covering its range). step_count increments first, so the first call uses bias correction step 1.
  // compute: empty, or one tensor per unit, each empty or the BF16 compute copy of params[u] (same
  // numel), which then receives bf16 of the updated parameters in the same pass (device home only).
  void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, float lr,
            const std::vector<Tensor>& compute = {});

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t s) { step_ = s; }
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  const std::vector<OptimizerRange>& ranges() const { return ranges_; }
  int64_t state_bytes() const;  // the moments, in `home()` memory
  OptimizerHome home() const { return home_; }

 private:
  struct Segment {  // a piece of one unit's range with a single weight-decay setting
    int unit;
    int64_t offset;  // relative to the range begin
    int64_t numel;
    bool decay;
  };
  std::vector<OptimizerRange> ranges_;
  std::vector<Segment> segments_;
  AdamWConfig config_;
  Ops& ops_;
  OptimizerHome home_;
  std::vector<Tensor> m_, v_;  // per unit, (end - begin)
  int64_t step_ = 0;
};

}  // namespace trlhpc
