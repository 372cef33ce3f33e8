#include "trlhpc/train/metrics_window.hpp"

namespace trlhpc {

void MetricsWindow::add(double loss, int64_t tokens, double seconds, double flops) {
  loss_sum_ += loss;
  seconds_ += seconds;
  tokens_ += tokens;
  flops_ += flops;
  ++steps_;
}

double MetricsWindow::mean_loss() const { return loss_sum_ / static_cast<double>(steps_); }

double MetricsWindow::tokens_per_second() const { return static_cast<double>(tokens_) / seconds_; }

double MetricsWindow::mfu(double peak_flops_per_rank, int ranks) const {
  return flops_ / seconds_ / (peak_flops_per_rank * ranks);
}

}  // namespace trlhpc
