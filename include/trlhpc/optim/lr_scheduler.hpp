#pragma once
// Learning-rate schedules matching transformers' get_scheduler step for step.
//
// lr(step) = base_lr * lambda(step), step = optimizer steps already taken (0 for the first update):
//   constant              1
//   constant_with_warmup  step < W ? step / max(1, W) : 1
//   linear                step < W ? step / max(1, W) : max(0, (S - step) / max(1, S - W))
//   cosine                step < W ? step / max(1, W) :
//                         max(0, 0.5 (1 + cos(pi * 2 * 0.5 * (step - W) / max(1, S - W))))
// W = warmup_steps, or ceil(warmup_ratio * S) when warmup_steps is 0 (TrainingArguments.get_warmup_steps);
// S = total optimizer steps.
#include <cstdint>
#include <string>

namespace trlhpc {

enum class LrSchedule { Constant, ConstantWithWarmup, Linear, Cosine };

LrSchedule parse_lr_schedule(const std::string& name);  // UserError naming --lr_scheduler_type
int64_t warmup_steps_for(int64_t warmup_steps, double warmup_ratio, int64_t total_steps);

class LrScheduler {
 public:
  LrScheduler(LrSchedule schedule, double base_lr, int64_t warmup_steps, int64_t total_steps)
      : schedule_(schedule), base_lr_(base_lr), warmup_(warmup_steps), total_(total_steps) {}
  double lambda(int64_t step) const;
  double lr(int64_t step) const { return base_lr_ * lambda(step); }

 private:
  LrSchedule schedule_;
  double base_lr_;
  int64_t warmup_, total_;
};

}  // namespace trlhpc
