#pragma once
// The optimizer steps since the last logged one, and what a log line reports about them: the mean
// loss (transformers' logging: the mean of the steps' losses), tokens per second and MFU.
#include <cstdint>

namespace trlhpc {

class MetricsWindow {
 public:
  // One step: its loss, the non-padding tokens of its global batch, its wall time and model FLOPs.
  void add(double loss, int64_t tokens, double seconds, double flops);
  bool empty() const { return steps_ == 0; }
  double mean_loss() const;
  double tokens_per_second() const;
  // Model FLOPs per second over `ranks` ranks of `peak_flops_per_rank` each.
  double mfu(double peak_flops_per_rank, int ranks) const;
  void clear() { *this = MetricsWindow(); }

 private:
  double loss_sum_ = 0, seconds_ = 0, flops_ = 0;
  int64_t steps_ = 0, tokens_ = 0;
};

}  // namespace trlhpc
