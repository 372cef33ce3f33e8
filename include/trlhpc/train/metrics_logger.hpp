#pragma once
// metrics.jsonl (CONTRACT.md) and the live progress line, written by global rank 0 only.
//
// One JSON object per logged step, flushed per line so a crashed run keeps what it logged. On a
// terminal the progress line redraws in place (\r); otherwise (a SLURM log) it prints plain lines.
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace trlhpc {

struct StepMetrics {
  int64_t step = 0, total_steps = 0;
  double loss = 0, grad_norm = 0, learning_rate = 0, epoch = 0;
  int64_t num_tokens = 0;  // tokens trained on so far (all ranks, incl. padding-free tokens only)
  double tokens_per_second = 0, mfu = 0, seconds_left = 0;
  int64_t skipped_steps = 0;  // steps skipped so far for a non-finite loss or gradient norm
  std::optional<double> entropy, mean_token_accuracy;  // TRL's (absent when the backend lacks them)
};

struct EvalMetrics {
  double loss = 0;
  std::optional<double> entropy, mean_token_accuracy;  // eval_entropy, eval_mean_token_accuracy
};

class MetricsLogger {
 public:
  // enabled = false on every rank but global rank 0: all calls become no-ops. `may_redraw` = false
  // forces plain lines (mpirun hands ranks a pseudo-terminal even when its own output is a file).
  MetricsLogger(const std::string& output_dir, bool enabled, bool may_redraw);
  ~MetricsLogger();
  MetricsLogger(const MetricsLogger&) = delete;
  MetricsLogger& operator=(const MetricsLogger&) = delete;

  void log_step(const StepMetrics& m);
  void log_eval(int64_t step, const EvalMetrics& eval, double epoch);
  void message(const std::string& text);  // a line above the progress display
  // Resuming after `step`: drops the lines of later steps (logged by the run that was interrupted,
  // and about to be logged again), so metrics.jsonl reads as one uninterrupted run.
  void forget_after(int64_t step);
  void finish();

 private:
  void write_line(const nlohmann::json& j);
  std::string path_;
  bool enabled_;
  bool tty_;
  bool progress_shown_ = false;
  std::FILE* file_ = nullptr;
};

}  // namespace trlhpc
