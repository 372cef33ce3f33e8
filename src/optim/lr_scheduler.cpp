#include "trlhpc/optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::Constant;
  if (name == "constant_with_warmup") return LrSchedule::ConstantWithWarmup;
  if (name == "linear") return LrSchedule::Linear;
  if (name == "cosine") return LrSchedule::Cosine;
  if (name == "cosine_with_min_lr") return LrSchedule::CosineWithMinLr;
  throw UserError("--lr_scheduler_type " + name +
                  " is not supported: use linear, cosine, cosine_with_min_lr, constant or constant_with_warmup");
}

namespace {

double kwarg_number(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    throw UserError("--lr_scheduler_kwargs: " + key + " must be a finite number, got " + value.dump());
  return value.get<double>();
}

}  // namespace

LrScheduleShape parse_lr_scheduler_kwargs(LrSchedule schedule, const std::string& kwargs_json, double base_lr) {
  LrScheduleShape shape;
  if (kwargs_json.empty()) return schedule == LrSchedule::CosineWithMinLr ? parse_lr_scheduler_kwargs(schedule, "{}", base_lr) : shape;
  const nlohmann::json kwargs = nlohmann::json::parse(kwargs_json, nullptr, /*allow_exceptions=*/false);
  if (!kwargs.is_object())
    throw UserError("--lr_scheduler_kwargs " + kwargs_json + ": must be a JSON object, e.g. '{\"min_lr_rate\": 0.1}'");
  const bool cosine = schedule == LrSchedule::Cosine || schedule == LrSchedule::CosineWithMinLr;
  std::optional<double> min_lr, min_lr_rate;
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "num_cycles" && cosine) {
      shape.num_cycles = kwarg_number(value, key);
    } else if (key == "min_lr" && schedule == LrSchedule::CosineWithMinLr) {
      min_lr = kwarg_number(value, key);
    } else if (key == "min_lr_rate" && schedule == LrSchedule::CosineWithMinLr) {
      min_lr_rate = kwarg_number(value, key);
    } else {
      throw UserError("--lr_scheduler_kwargs: '" + key + "' is not an argument of this --lr_scheduler_type (cosine "
                      "takes num_cycles; cosine_with_min_lr takes min_lr_rate or min_lr, and num_cycles; the others none)");
    }
  }
  if (schedule != LrSchedule::CosineWithMinLr) return shape;
  // transformers' get_cosine_with_min_lr_schedule_with_warmup: exactly one of the two.
  if (min_lr && min_lr_rate) throw UserError("--lr_scheduler_kwargs: give min_lr_rate or min_lr, not both");
  if (!min_lr && !min_lr_rate)
    throw UserError("--lr_scheduler_type cosine_with_min_lr needs --lr_scheduler_kwargs '{\"min_lr_rate\": R}' (or min_lr)");
  shape.min_lr_rate = min_lr_rate ? *min_lr_rate : *min_lr / base_lr;
  return shape;
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
    case LrSchedule::Cosine:
    case LrSchedule::CosineWithMinLr: {
      const double progress = (s - w) / rest;
      const double factor = 0.5 * (1.0 + std::cos(M_PI * shape_.num_cycles * 2.0 * progress));
      return std::max(0.0, factor * (1.0 - shape_.min_lr_rate) + shape_.min_lr_rate);
    }
    default: return 1.0;
  }
}

}  // namespace trlhpc
