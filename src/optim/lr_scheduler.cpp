#include "trlhpc/optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::Constant;
  if (name == "constant_with_warmup") return LrSchedule::ConstantWithWarmup;
  if (name == "linear") return LrSchedule::Linear;
  if (name == "cosine") return LrSchedule::Cosine;
  throw UserError("--lr_scheduler_type " + name + " is not supported: use linear, cosine, constant or constant_with_warmup");
}

int64_t warmup_steps_for(int64_t warmup_steps, double warmup_ratio, int64_t total_steps) {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

double LrScheduler::lambda(int64_t step) const {
  const double s = static_cast<double>(step), w = static_cast<double>(warmup_);
  if (schedule_ == LrSchedule::Constant) return 1.0;
  if (step < warmup_) return s / std::max(1.0, w);
  const double rest = std::max(1.0, static_cast<double>(total_ - warmup_));
  switch (schedule_) {
    case LrSchedule::ConstantWithWarmup: return 1.0;
    case LrSchedule::Linear: return std::max(0.0, (static_cast<double>(total_) - s) / rest);
    case LrSchedule::Cosine: {
      const double progress = (s - w) / rest;
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 2.0 * 0.5 * progress)));
    }
    default: return 1.0;
  }
}

}  // namespace trlhpc
