#include "trlhpc/train/best_model.hpp"

#include "trlhpc/core/error.hpp"

namespace trlhpc {

std::string best_model_metric_name(const std::string& metric_for_best_model) {
  if (metric_for_best_model.empty() || metric_for_best_model.rfind("eval_", 0) == 0) return metric_for_best_model;
  return "eval_" + metric_for_best_model;
}

std::optional<BestModelTracker> BestModelTracker::from_config(const SftConfig& c) {
  if (c.metric_for_best_model.empty() && !c.load_best_model_at_end && c.save_strategy != "best") return std::nullopt;
  BestModelTracker t;
  // TrainingArguments.__post_init__: load_best_model_at_end without a metric uses "loss"; greater_is_better
  // unset is "not a loss".
  t.metric_ = best_model_metric_name(c.metric_for_best_model.empty() ? "loss" : c.metric_for_best_model);
  const bool is_loss = t.metric_.size() >= 4 && t.metric_.compare(t.metric_.size() - 4, 4, "loss") == 0;
  t.greater_is_better_ = c.greater_is_better.empty() ? !is_loss : c.greater_is_better == "true";
  return t;
}

bool BestModelTracker::observe(const EvalMetrics& m, int64_t step) {
  const std::optional<double> value = metric_ == "eval_loss"                  ? std::optional<double>(m.loss)
                                      : metric_ == "eval_entropy"             ? m.entropy
                                      : metric_ == "eval_mean_token_accuracy" ? m.mean_token_accuracy
                                                                              : std::nullopt;
  if (!value)
    throw UserError("--metric_for_best_model " + metric_ + ": the evaluation after step " + std::to_string(step) +
                    " did not compute it (entropy and token accuracy are not reported on this backend or layout); "
                    "use eval_loss");
  const bool better = !best_metric_ || (greater_is_better_ ? *value > *best_metric_ : *value < *best_metric_);
  if (!better) return false;
  best_metric_ = value;
  best_step_ = step;
  return true;
}

void BestModelTracker::saved(int64_t step, const std::string& dir) {
  if (step != best_step_) return;
  best_checkpoint_ = dir;
  best_checkpoint_step_ = step;
}

nlohmann::json BestModelTracker::to_json() const {
  return {{"metric", metric_},
          {"greater_is_better", greater_is_better_},
          {"best_metric", best_metric_ ? nlohmann::json(*best_metric_) : nlohmann::json()},
          {"best_step", best_step_},
          {"best_checkpoint", best_checkpoint_},
          {"best_checkpoint_step", best_checkpoint_step_}};
}

void BestModelTracker::restore(const nlohmann::json& r) {
  if (!r.is_object() || r.value("metric", "") != metric_ || r.value("greater_is_better", false) != greater_is_better_)
    return;
  if (r.contains("best_metric") && r["best_metric"].is_number()) best_metric_ = r["best_metric"].get<double>();
  best_step_ = r.value("best_step", int64_t{-1});
  best_checkpoint_ = r.value("best_checkpoint", "");
  best_checkpoint_step_ = r.value("best_checkpoint_step", int64_t{-1});
}

}  // namespace trlhpc
