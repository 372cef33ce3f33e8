#include "src/train/sft_loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/flops.hpp"
#include "trlhpc/train/sft_validation.hpp"

namespace trlhpc {
namespace {

batching::SamplerConfig sampler_config(const SftConfig& c, const dataset::SftDataset& train, int64_t dp) {
  return {train.num_rows(), c.per_device_train_batch_size, dp, c.gradient_accumulation_steps, c.data_seed.value_or(c.seed),
          c.shuffle_dataset, c.dataloader_drop_last};
}

int64_t total_steps_of(const SftConfig& c, const batching::DistributedSampler& sampler) {
  return checked_total_steps(c, sampler.steps_per_epoch(), sampler.global_batch_size());
}

std::string written_in_background(const checkpoint::AsyncCheckpointSaver& saver) {
  char text[64];
  std::snprintf(text, sizeof text, " (written in the background in %.1f s)", saver.last_write_seconds());
  return text;
}

bool every(int64_t interval, int64_t step) { return interval > 0 && (step + 1) % interval == 0; }

}  // namespace

SftLoop::SftLoop(const SftConfig& config, LrSchedule schedule, Trainer& trainer, const dataset::SftDataset& train,
                 const dataset::SftDataset* eval, MetricsLogger& logger, const PreemptionWatch& watch)
    : config_(config),
      trainer_(trainer),
      train_(train),
      eval_(eval),
      logger_(logger),
      sampler_(sampler_config(config, train, trainer.model().groups().dp().size())),
      total_steps_(total_steps_of(config, sampler_)),
      scheduler_(schedule, config.learning_rate, warmup_steps_for(config.warmup_steps, config.warmup_ratio, total_steps_),
                 total_steps_, parse_lr_scheduler_kwargs(schedule, config.lr_scheduler_kwargs, config.learning_rate)),
      best_(BestModelTracker::from_config(config)),
      watch_(watch) {
  trainer_.model().decoder().set_neftune({config.neftune_noise_alpha, config.seed});
}

void SftLoop::set_checkpoints(checkpoint::SaveRequest request, int64_t save_steps,
                              checkpoint::AsyncCheckpointSaver* async) {
  save_steps_ = save_steps;
  async_ = async;
  save_request_ = std::move(request);
  checkpoints_ = true;
}

void SftLoop::resume_at(const checkpoint::TrainingProgress& progress, const nlohmann::json& best_model) {
  if (best_) best_->restore(best_model);
  first_step_ = progress.step;
  num_tokens_ = progress.num_tokens;
  last_saved_ = progress.step;
}

std::string SftLoop::save(int64_t steps) {
  trainer_.model().groups().set_phase("checkpoint save after step " + std::to_string(steps));
  checkpoint::SaveRequest request = save_request_;
  const batching::SamplerPosition next = sampler_.position(steps);
  request.progress = {steps, num_tokens_, epoch_after(steps - 1), next.epoch, next.step};
  last_saved_ = steps;
  if (best_) {  // as transformers: this checkpoint is the best one if its step is the best step
    best_->saved(steps, checkpoint::checkpoint_dir(request.output_dir, steps));
    request.keep_step = best_->best_checkpoint_step();
    request.best_model = best_->to_json();
  }
  if (async_) {
    finish_async_save();
    async_->start(request, trainer_);
    async_unreported_ = checkpoint::checkpoint_dir(request.output_dir, steps);
    return async_unreported_;
  }
  const std::string dir = checkpoint::save_checkpoint(request, trainer_);
  logger_.message("checkpoint saved: " + dir);
  return dir;
}

void SftLoop::finish_async_save() {
  if (!async_) return;
  trainer_.model().groups().set_phase("waiting for the asynchronous checkpoint save");
  async_->wait();
  if (!async_unreported_.empty()) logger_.message("checkpoint saved: " + async_unreported_ + written_in_background(*async_));
  async_unreported_.clear();
}

void SftLoop::report_async_save() {
  if (!async_ || async_unreported_.empty()) return;
  const std::string dir = async_->take_committed();
  if (dir.empty()) return;
  logger_.message("checkpoint saved: " + dir + written_in_background(*async_));
  async_unreported_.clear();
}

SftLoopOutcome SftLoop::stop_for(int signal, int64_t steps) {
  SftLoopOutcome outcome{signal, steps, ""};
  finish_async_save();
  if (steps == last_saved_) {
    outcome.checkpoint = checkpoint::checkpoint_dir(save_request_.output_dir, steps);
  } else if (steps > 0 && checkpoints_) {
    checkpoint::AsyncCheckpointSaver* async = std::exchange(async_, nullptr);  // the job ends: write it now
    outcome.checkpoint = save(steps);
    async_ = async;
  }
  return outcome;
}

void SftLoop::handle_nonfinite(int64_t step, const StepResult& r) {
  const std::string where = r.first_nonfinite_gradient.empty() ? ""
                                                               : "; first non-finite gradient: " + r.first_nonfinite_gradient;
  if (!config_.skip_nonfinite_steps)
    throw UserError("step " + std::to_string(step + 1) + ": loss " + std::to_string(r.loss) + ", grad_norm " +
                    std::to_string(r.grad_norm) + where +
                    ". The step was not applied; nothing was saved after the last checkpoint. Lower --learning_rate "
                    "(or raise --warmup_steps), check the data, or pass --skip_nonfinite_steps to skip such steps");
  ++skipped_steps_;
  logger_.message("step " + std::to_string(step + 1) + " skipped: loss " + std::to_string(r.loss) + ", grad_norm " +
                  std::to_string(r.grad_norm) + where + " (" + std::to_string(skipped_steps_) + " skipped so far)");
}

double SftLoop::epoch_after(int64_t step) const { return sampler_.epoch_after(step); }

std::vector<Batch> SftLoop::step_micro_batches(int64_t step) {
  const batching::SamplerPosition pos = sampler_.position(step);
  const int64_t dp_rank = trainer_.model().groups().dp().rank();
  std::vector<Batch> micro;
  for (int64_t a = 0; a < config_.gradient_accumulation_steps; ++a) {
    const std::vector<int64_t> rows = sampler_.micro_batch(pos.epoch, pos.step, a, dp_rank);
    // An empty slot of a partial last batch (sampler.hpp) still runs the step's collectives.
    micro.push_back(trainer_.model().shard_tokens(rows.empty() ? padding_batch(2) : train_.collate(rows)));
  }
  return micro;
}

void SftLoop::log_step(int64_t step, const StepResult& result, const MfuPeaks& peaks) {
  StepMetrics m;
  m.total_steps = total_steps_;
  m.step = step + 1;
  m.loss = window_.mean_loss();
  m.grad_norm = result.grad_norm;
  // The rate this step used, as transformers 5 logs it (Trainer reads the rate before lr_scheduler.step()
  // and passes it to _maybe_log_save_evaluate); TRL 1.16 logs 0 at step 1 of a 1-step warmup.
  m.learning_rate = scheduler_.lr(step);
  m.epoch = epoch_after(step);
  m.num_tokens = num_tokens_;
  m.tokens_per_second = window_.tokens_per_second();
  const int world = trainer_.model().groups().world().size();
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  m.mfu = peaks.nominal > 0 ? window_.mfu(peaks.nominal, world) : unknown;
  if (peaks.measured_gemm > 0) m.mfu_of_gemm_rate = window_.mfu(peaks.measured_gemm, world);
  // Model FLOPs above the nominal peak cannot happen: one of the two numbers is wrong. Say once which
  // (the value printed is the real quotient, not capped, so the report carries it).
  if (m.mfu > 1.0 && !mfu_warned_) {
    mfu_warned_ = true;
    char text[160];
    std::snprintf(text, sizeof text, "warning: MFU %.4g %% at step %lld is above the peak it is measured against (",
                  100.0 * m.mfu, static_cast<long long>(step + 1));
    logger_.message(text + peaks.nominal_text + "): " +
                    (peaks.nominal_from_flag
                         ? "--peak_flops is below the rate reached; pass the hardware's peak per rank"
                         : "the nominal peak (its FMA-unit table or clock, ops/nominal_peak.hpp) or the FLOP count "
                           "(train/flops.hpp) is wrong; please report it with this line and the start line"));
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double done = static_cast<double>(step + 1 - first_step_);
  m.seconds_left = elapsed / done * static_cast<double>(total_steps_ - step - 1);
  m.skipped_steps = skipped_steps_;
  if (window_.has_token_metrics()) {
    m.entropy = window_.mean_entropy();
    m.mean_token_accuracy = window_.mean_token_accuracy();
  }
  logger_.log_step(m);
  window_.clear();
}

std::optional<EvalResult> SftLoop::evaluate() {
  ParallelModel& model = trainer_.model();
  const batching::EvalPlan plan = batching::eval_micro_batches(eval_->num_rows(), model.groups().dp().size(),
                                                                model.groups().dp().rank(),
                                                                config_.per_device_eval_batch_size);
  std::vector<Batch> batches;
  for (const std::vector<int64_t>& rows : plan.micro_batches) batches.push_back(model.shard_tokens(eval_->collate(rows)));
  // Every rank runs the same number of forwards (sharded strategies gather inside them): pad with
  // batches of one all-padding row, which carry no target.
  while (static_cast<int64_t>(batches.size()) < plan.micro_batch_count)
    batches.push_back(model.shard_tokens(padding_batch(2)));
  Communicator& world = model.groups().world().host();
  return trainer_.evaluate_unless(batches, [&] { return watch_.agreed_signal(world) != 0; });
}

bool SftLoop::evaluate_and_log(int64_t steps_done, double epoch, bool* improved) {
  trainer_.model().groups().set_phase("evaluation at step " + std::to_string(steps_done));
  const std::optional<EvalResult> eval = evaluate();
  if (!eval) return false;
  EvalMetrics metrics{eval->loss, std::nullopt, std::nullopt};
  if (eval->has_token_metrics) {
    metrics.entropy = eval->entropy;
    metrics.mean_token_accuracy = eval->mean_token_accuracy;
  }
  logger_.log_eval(steps_done, metrics, epoch);
  if (improved) *improved = best_ && best_->observe(metrics, steps_done);
  return true;
}

SftLoopOutcome SftLoop::run(const MfuPeaks& peaks) {
  const ModelConfig& model = trainer_.model().config();
  Communicator& world = trainer_.model().groups().world().host();
  start_ = Clock::now();
  ProcessGroups& groups = trainer_.model().groups();
  // TrainingArguments' eval_on_start: a sanity check of the untrained model, logged at step 0 (a resumed
  // run has been evaluated before).
  if (eval_ && config_.eval_on_start && first_step_ == 0 && !evaluate_and_log(0, 0.0))
    return stop_for(watch_.agreed_signal(world), 0);
  for (int64_t step = first_step_; step < total_steps_; ++step) {
    groups.set_phase("step " + std::to_string(step + 1));
    if (const int signal = watch_.agreed_signal(world)) return stop_for(signal, step);
    const auto t0 = Clock::now();
    const std::vector<Batch> micro = step_micro_batches(step);
    trainer_.model().decoder().set_training_step(step);  // LoRA dropout, NEFTune: fresh draws every step
    const StepResult r = trainer_.step(micro, scheduler_.lr(step));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r.finite) {
      window_.add(r.loss, r.tokens, seconds, training_flops(model, r.tokens, r.attended_pairs));
      if (r.has_token_metrics) window_.add_token_metrics(r.entropy_ratio_sum, r.accuracy_ratio_sum, r.micro_steps);
      num_tokens_ += r.tokens;
    } else {
      handle_nonfinite(step, r);
    }
    const bool last = step + 1 == total_steps_;
    // A window of skipped steps only still logs its line (loss null), so skipped_steps shows.
    // transformers' DefaultFlowCallback: logging_first_step logs global step 1 whatever the strategy; epoch
    // strategies act when an epoch's last step is done (and when max_steps ends one early).
    const bool epoch_end = (step + 1) % sampler_.steps_per_epoch() == 0 || last;
    const bool first_log = config_.logging_first_step && step == 0;
    const bool log_now = config_.logging_strategy == "epoch" ? epoch_end
                         : config_.logging_strategy == "no"  ? false
                                                             : every(config_.logging_steps, step) || last;
    if (log_now || first_log) log_step(step, r, peaks);
    bool improved = false;  // transformers evaluates before it saves: a save at this step may be the best
    if (eval_ && (every(config_.eval_steps, step) || last) && !evaluate_and_log(step + 1, epoch_after(step), &improved))
      return stop_for(watch_.agreed_signal(world), step + 1);
    // save_strategy best: a checkpoint whenever the metric improved (Trainer._maybe_log_save_evaluate).
    const bool save_now = config_.save_strategy == "best"    ? improved
                          : config_.save_strategy == "epoch" ? epoch_end
                                                             : every(save_steps_, step);
    if (save_now) save(step + 1);
    report_async_save();
  }
  finish_async_save();
  return {0, total_steps_, last_saved_ == total_steps_ ? checkpoint::checkpoint_dir(save_request_.output_dir, total_steps_) : ""};
}

}  // namespace trlhpc
