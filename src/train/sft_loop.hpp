#pragma once
// The training loop of `trlhpc sft`: for each optimizer step this rank's micro-batches (the sampler's
// rows of its dp rank, collated, then cut to its cp/sp shard), one Trainer::step at the scheduled
// learning rate, a metrics line every logging_steps, an evaluation every eval_steps and after the last,
// a checkpoint every save_steps. A resumed loop starts at the checkpoint's step: the learning rate and
// the sampler's rows are functions of the step, so the steps that follow are those of an uninterrupted
// run.
//
// Preemption (preemption.hpp): before each step and each evaluation batch the ranks agree on whether
// a SIGTERM/SIGUSR1 arrived; if so the loop writes a checkpoint of the steps done (unless that one
// exists) and returns, and the job exits with code 3. A step with a non-finite loss or gradient norm
// changes nothing (Trainer::step); the loop then stops with a UserError naming the step and the first
// parameter, or with --skip_nonfinite_steps counts it and goes on.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/optim/lr_scheduler.hpp"
#include "trlhpc/train/best_model.hpp"
#include "trlhpc/train/metrics_logger.hpp"
#include "trlhpc/train/checkpoint/async_save.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/metrics_window.hpp"
#include "trlhpc/train/mfu_peaks.hpp"
#include "trlhpc/train/preemption.hpp"
#include "trlhpc/train/sft_config.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {

// How the loop ended.
struct SftLoopOutcome {
  int signal = 0;          // non-zero: stopped early by this preemption signal
  int64_t steps_done = 0;  // optimizer steps trained (including those before a resume)
  std::string checkpoint;  // the checkpoint holding steps_done ("" when none was needed or possible)
};

class SftLoop {
 public:
  // `eval` may be null (no --eval_dataset). Everything is borrowed.
  SftLoop(const SftConfig& config, LrSchedule schedule, Trainer& trainer, const dataset::SftDataset& train,
          const dataset::SftDataset* eval, MetricsLogger& logger, const PreemptionWatch& watch);

  int64_t total_steps() const { return total_steps_; }
  int64_t global_batch_size() const { return sampler_.global_batch_size(); }
  int64_t rows_per_epoch() const { return sampler_.rows_per_epoch(); }
  // Checkpoints use `request`'s settings: every `save_steps` (> 0) steps, and when preempted. With
  // `async` (borrowed; may be null) the periodic ones are written in the background; a preemption
  // waits for one under way and writes its own synchronously (no host copy to make first).
  void set_checkpoints(checkpoint::SaveRequest request, int64_t save_steps,
                       checkpoint::AsyncCheckpointSaver* async = nullptr);
  // Continues after `progress.step` steps (the trainer already holds the checkpoint's state);
  // `best_model`: the checkpoint manifest's best-model record (null: none).
  void resume_at(const checkpoint::TrainingProgress& progress, const nlohmann::json& best_model = nullptr);
  // The best-model selection (best_model.hpp), when the run asked for one.
  const std::optional<BestModelTracker>& best_model() const { return best_; }
  // Every step, with MFU against `peaks` (mfu_peaks.hpp).
  SftLoopOutcome run(const MfuPeaks& peaks);

 private:
  using Clock = std::chrono::steady_clock;
  // This rank's micro-batches of optimizer step `step`, cut to its cp/sp shard.
  std::vector<Batch> step_micro_batches(int64_t step);
  void log_step(int64_t step, const StepResult& result, const MfuPeaks& peaks);
  // Mean loss over every eval row (batching::eval_micro_batches deals them over the dp ranks); nullopt
  // when the ranks agreed on a preemption signal between two batches.
  std::optional<EvalResult> evaluate();
  // Evaluates and logs eval metrics at `steps_done` optimizer steps; false when a stop signal came.
  // *improved (optional): whether the best-model metric improved (always false without a selection).
  bool evaluate_and_log(int64_t steps_done, double epoch, bool* improved = nullptr);
  double epoch_after(int64_t step) const;
  // A checkpoint of `steps` optimizer steps done (in the background with --async_save); its folder.
  std::string save(int64_t steps);
  // Collective: the background save under way is committed (its failure thrown on every rank).
  void finish_async_save();
  // Logs "checkpoint saved" once the background save is committed (rank 0 may see it earlier than
  // others: this only prints).
  void report_async_save();
  // Preempted after `steps` steps: the checkpoint of them (written unless it exists) and the outcome.
  SftLoopOutcome stop_for(int signal, int64_t steps);
  // A non-finite step: a UserError, or (--skip_nonfinite_steps) counted.
  void handle_nonfinite(int64_t step, const StepResult& result);

  const SftConfig& config_;
  Trainer& trainer_;
  const dataset::SftDataset& train_;
  const dataset::SftDataset* eval_;
  MetricsLogger& logger_;
  batching::DistributedSampler sampler_;
  int64_t total_steps_ = 0;
  LrScheduler scheduler_;
  MetricsWindow window_;
  int64_t num_tokens_ = 0;  // trained so far, all ranks
  int64_t first_step_ = 0;  // 0, or the step a resumed run continues after
  int64_t save_steps_ = 0;
  checkpoint::SaveRequest save_request_;
  bool checkpoints_ = false;      // set_checkpoints was called
  checkpoint::AsyncCheckpointSaver* async_ = nullptr;
  std::string async_unreported_;  // folder of the background save not yet logged as saved
  int64_t last_saved_ = -1;       // steps held by the newest checkpoint (the resumed one counts)
  int64_t skipped_steps_ = 0;
  std::optional<BestModelTracker> best_;  // --metric_for_best_model / --load_best_model_at_end / save_strategy best
  bool mfu_warned_ = false;  // the MFU-above-100 % warning was printed
  const PreemptionWatch& watch_;
  Clock::time_point start_;
};

}  // namespace trlhpc
