#pragma once
// metrics.jsonl (CONTRACT.md) and the live progress line, written by global rank 0 only.
//
// One JSON object per logged step, flushed per line so a crashed run keeps what it logged. On a
// terminal the progress line redraws in place (\r); otherwise (a SLURM log) it prints plain lines.
// With a TensorBoard folder, every numeric field of each line but "step" also goes to an event file
// under Hugging Face's tag names (tensorboard_scalars), so fields added to the lines show up there too.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/io/tensorboard_writer.hpp"

namespace trlhpc {

struct StepMetrics {
  int64_t step = 0, total_steps = 0;
  double loss = 0, grad_norm = 0, learning_rate = 0, epoch = 0;
  int64_t num_tokens = 0;  // tokens trained on so far (all ranks, incl. padding-free tokens only)
  double tokens_per_second = 0, seconds_left = 0;
  double mfu = 0;  // against the nominal peak or --peak_flops (mfu_peaks.hpp); NaN: unknown (logged null)
  std::optional<double> mfu_of_gemm_rate;  // against the measured GEMM rate; nullopt: not measured (null)
  int64_t skipped_steps = 0;  // steps skipped so far for a non-finite loss or gradient norm
  std::optional<double> entropy, mean_token_accuracy;  // TRL's (absent when the backend lacks them)
};

struct EvalMetrics {
  double loss = 0;
  std::optional<double> entropy, mean_token_accuracy;  // eval_entropy, eval_mean_token_accuracy
};

// The TensorBoard scalars of one metrics.jsonl line, named as transformers' TensorBoardCallback names
// logs (rewrite_logs): "eval_X" -> "eval/X", "test_X" -> "test/X", every other field X -> "train/X". "step" is the event's
// step, not a scalar; non-numeric values (a null loss of a window of skipped steps) are left out.
TensorBoardScalars tensorboard_scalars(const nlohmann::json& line);

class MetricsLogger {
 public:
  // enabled = false on every rank but global rank 0: all calls become no-ops. `may_redraw` = false
  // forces plain lines (mpirun hands ranks a pseudo-terminal even when its own output is a file).
  // A non-empty `tensorboard_dir` also writes the lines as TensorBoard scalars there.
  MetricsLogger(const std::string& output_dir, bool enabled, bool may_redraw, const std::string& tensorboard_dir = "");
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
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace trlhpc
