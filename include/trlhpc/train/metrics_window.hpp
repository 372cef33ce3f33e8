#pragma once
// The optimizer steps since the last logged one, and what a log line reports about them: the mean
// loss (transformers' logging: the mean of the steps' losses), TRL's entropy and mean_token_accuracy,
// tokens per second and MFU.
#include <cstdint>

namespace trlhpc {

class MetricsWindow {
 public:
  // One step: its loss, the non-padding tokens of its global batch, its wall time and model FLOPs.
  void add(double loss, int64_t tokens, double seconds, double flops);
  // TRL's per-micro-step metric ratios of one step (StepResult): their sums over its micro-steps.
  void add_token_metrics(double entropy_ratio_sum, double accuracy_ratio_sum, int64_t micro_steps);
  // Means over every micro-step of the window, as TRL logs entropy and mean_token_accuracy; 0 micro-steps
  // (no step, or a backend without the metrics): has_token_metrics() is false.
  bool has_token_metrics() const { return micro_steps_ > 0; }
  double mean_entropy() const { return entropy_sum_ / static_cast<double>(micro_steps_); }
  double mean_token_accuracy() const { return accuracy_sum_ / static_cast<double>(micro_steps_); }
  bool empty() const { return steps_ == 0; }
  double mean_loss() const;
  double tokens_per_second() const;
  // Model FLOPs per second over `ranks` ranks of `peak_flops_per_rank` each.
  double mfu(double peak_flops_per_rank, int ranks) const;
  void clear() { *this = MetricsWindow(); }

 private:
  double loss_sum_ = 0, seconds_ = 0, flops_ = 0;
  int64_t steps_ = 0, tokens_ = 0;
  double entropy_sum_ = 0, accuracy_sum_ = 0;
  int64_t micro_steps_ = 0;
};

}  // namespace trlhpc
