#pragma once
// transformers' best-model bookkeeping (Trainer._determine_best_metric, _save_checkpoint, the end of
// train(); read in transformers 5.25, not copied), for --metric_for_best_model, --greater_is_better,
// --save_strategy best and --load_best_model_at_end:
//   - after every evaluation during training (not eval_on_start's) the metric is compared with the best
//     so far, strictly (np.greater / np.less): a tie is not an improvement; the step of an improvement
//     becomes the best step;
//   - when a checkpoint of the best step is saved, it becomes the best checkpoint: rotation
//     (--save_total_limit) never deletes it, and --load_best_model_at_end loads its weights at the end;
//   - the state travels in each checkpoint's manifest, so a resumed run keeps comparing with the best
//     of the run before (trainer_state.json's best_metric / best_global_step / best_model_checkpoint).
// Every rank holds the same state: the eval metrics it sees are all-reduced.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/train/metrics_logger.hpp"
#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

class BestModelTracker {
 public:
  // None unless --metric_for_best_model, --load_best_model_at_end or --save_strategy best asks for it
  // (sft_validation checked the combination; the metric defaults to eval_loss, lower is better).
  static std::optional<BestModelTracker> from_config(const SftConfig& config);

  // The evaluation after `step` steps; true when it improves on the best (which it then becomes).
  // A UserError, on every rank alike, when the metric was not computed by this evaluation.
  bool observe(const EvalMetrics& metrics, int64_t step);
  // A checkpoint of `step` steps was saved in `dir`: the best checkpoint when `step` is the best step.
  void saved(int64_t step, const std::string& dir);

  const std::string& metric() const { return metric_; }  // "eval_loss", ...
  std::optional<double> best_metric() const { return best_metric_; }
  // The best checkpoint's folder and step ("" and -1 while none).
  const std::string& best_checkpoint() const { return best_checkpoint_; }
  int64_t best_checkpoint_step() const { return best_checkpoint_step_; }

  // The manifest's "best_model" record, and reading it back on resume (a checkpoint without one, or
  // for another metric, leaves the state fresh).
  nlohmann::json to_json() const;
  void restore(const nlohmann::json& record);

 private:
  std::string metric_;
  bool greater_is_better_ = false;
  std::optional<double> best_metric_;
  int64_t best_step_ = -1;
  std::string best_checkpoint_;
  int64_t best_checkpoint_step_ = -1;
};

// --metric_for_best_model as transformers reads it: "eval_" is prefixed unless already there; empty
// stays empty.
std::string best_model_metric_name(const std::string& metric_for_best_model);

}  // namespace trlhpc
