#include "trlhpc/train/metrics_window.hpp"

namespace trlhpc {

void MetricsWindow::add(double loss, int64_t tokens, double seconds, double flops) {
  loss_sum_ += loss;
  seconds_ += seconds;
  tokens_ += tokens;
  flops_ += flops;
  ++steps_;
}

void MetricsWindow::add_token_metrics(double entropy_ratio_sum, double accuracy_ratio_sum, int64_t micro_steps) {
  entropy_sum_ += entropy_ratio_sum;
  accuracy_sum_ += accuracy_ratio_sum;
  micro_steps_ += micro_steps;
}

double MetricsWindow::mean_loss() const { return loss_sum_ / static_cast<double>(steps_); }

double MetricsWindow::tokens_per_second() const { return static_cast<double>(tokens_) / seconds_; }

double MetricsWindow::mfu(double peak_flops_per_rank, int ranks) const {
  return flops_ / seconds_ / (peak_flops_per_rank * ranks);
}

}  // namespace trlhpc
