#pragma once
// Learning-rate schedules matching transformers' get_scheduler step for step.
//
// lr(step) = base_lr * lambda(step), step = optimizer steps already taken (0 for the first update):
//   constant              1
//   constant_with_warmup  step < W ? step / max(1, W) : 1
//   linear                step < W ? step / max(1, W) : max(0, (S - step) / max(1, S - W))
//   cosine                step < W ? step / max(1, W) :
//                         max(0, 0.5 (1 + cos(pi * 2 * C * (step - W) / max(1, S - W))))
//   cosine_with_min_lr    as cosine, then factor * (1 - R) + R: decays to R * base_lr instead of 0
// C = num_cycles (0.5: half a cosine), R = min_lr_rate, both from --lr_scheduler_kwargs (a JSON object,
// transformers' scheduler_specific_kwargs): {"num_cycles": C} for cosine, {"min_lr_rate": R} or
// {"min_lr": LR} (R = LR / base_lr; exactly one is required) and num_cycles for cosine_with_min_lr
// (transformers' _get_cosine_schedule_with_warmup_lr_lambda; the fixture tests/golden/schedulers_min_lr.json).
// W = warmup_steps, or ceil(warmup_ratio * S) when warmup_steps is 0 (TrainingArguments.get_warmup_steps);
// S = total optimizer steps.
#include <cstdint>
#include <string>

namespace trlhpc {

enum class LrSchedule { Constant, ConstantWithWarmup, Linear, Cosine, CosineWithMinLr };

LrSchedule parse_lr_schedule(const std::string& name);  // UserError naming --lr_scheduler_type
// The shape parameters of a schedule, from --lr_scheduler_kwargs.
struct LrScheduleShape {
  double num_cycles = 0.5;
  double min_lr_rate = 0.0;
};

// `kwargs_json` is --lr_scheduler_kwargs ("" and "{}": none). UserError naming the option and the key for
// a key the schedule does not take, a value that is not a finite number, or a missing min_lr(_rate).
LrScheduleShape parse_lr_scheduler_kwargs(LrSchedule schedule, const std::string& kwargs_json, double base_lr);

int64_t warmup_steps_for(int64_t warmup_steps, double warmup_ratio, int64_t total_steps);

class LrScheduler {
 public:
  LrScheduler(LrSchedule schedule, double base_lr, int64_t warmup_steps, int64_t total_steps,
              LrScheduleShape shape = {})
      : schedule_(schedule), base_lr_(base_lr), warmup_(warmup_steps), total_(total_steps), shape_(shape) {}
  double lambda(int64_t step) const;
  double lr(int64_t step) const { return base_lr_ * lambda(step); }

 private:
  LrSchedule schedule_;
  double base_lr_;
  int64_t warmup_, total_;
  LrScheduleShape shape_;
};

}  // namespace trlhpc
