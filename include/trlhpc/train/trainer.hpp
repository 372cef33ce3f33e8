#pragma once
// Trainer: one optimizer step over a rank's micro-batches, identical in meaning on every layout.
//
// The step loss is the token mean over the whole global batch (CONTRACT.md): before any backward the
// target tokens of all micro-batches on all ranks of the `loss` group are summed (N_global), and each
// micro-batch's loss gradient is scaled by 1/N_global. Gradients then need only a SUM across ranks,
// and any split of the same global batch (dp x accumulation x per-device) gives the same update.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {

class ProcessGroups;

struct TrainerOptions {
  ParallelizeOptions parallel;  // how the model is laid out (parallelize.hpp)
  AdamWConfig adamw;
  double max_grad_norm = 1.0;  // 0 disables clipping
};

struct StepResult {
  double loss = 0;             // mean CE over the global batch's target tokens
  double grad_norm = 0;        // global L2 norm before clipping
  int64_t target_tokens = 0;   // N_global
  int64_t tokens = 0;          // non-padding input tokens of the global batch
  int64_t attended_pairs = 0;  // their causal (query, key) pairs summed over the layers (flops.hpp)
  // False when the loss or the gradient norm is NaN or infinite (the same verdict on every rank):
  // the optimizer did not step, the gradients were dropped, the parameters are unchanged.
  bool finite = true;
  std::string first_nonfinite_gradient;  // !finite: the first parameter (store order) with one, or ""
  // TRL's metrics, as SFTTrainer.compute_loss records them: per micro-step (all dp/cp/sp ranks
  // together: the rows HF's single process holds in one micro-batch), entropy_sum / valid and
  // top1 / valid (0 when it has no target); here the sums of those ratios over the step's micro-steps.
  // TRL logs their mean over every micro-step of the logging window.
  bool has_token_metrics = false;  // false: the backend does not compute them
  double entropy_ratio_sum = 0, accuracy_ratio_sum = 0;
  int64_t micro_steps = 0;
};

// One evaluation: mean loss over every eval target token, and TRL's eval_entropy /
// eval_mean_token_accuracy (means over the eval batches of their per-batch ratios).
struct EvalResult {
  double loss = 0;
  bool has_token_metrics = false;
  double entropy = 0, mean_token_accuracy = 0;
};

class Trainer {
 public:
  // Lays the model out with parallelize() (tp sequence parallelism as the mesh's dims say: every
  // micro-batch's tokens must then divide by tp, see ParallelModel::shard_tokens) and builds AdamW
  // over the parameters this rank owns.
  Trainer(const ModelConfig& config, Ops& ops, ProcessGroups& groups, const TrainerOptions& options);
  ~Trainer();

  // One optimizer step on this rank's micro-batches (the same count on every rank) at learning rate lr.
  // A non-finite loss or gradient norm skips the update (StepResult::finite) instead of spreading NaN
  // into the weights and the optimizer state.
  StepResult step(const std::vector<Batch>& micro_batches, double lr);
  // Mean loss over the global evaluation batch (no gradients).
  double evaluate(const std::vector<Batch>& batches);
  // The same, asking `stop` before each batch (a collective decision: every rank runs the same number
  // of batches and must get the same answer); nullopt when it said stop.
  std::optional<EvalResult> evaluate_unless(const std::vector<Batch>& batches, const std::function<bool()>& stop);

  // The laid-out model: store, strategy, decoder, sequence sharding, load_weights.
  ParallelModel& model() { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  MemoryAccount memory() const { return model_->memory(optimizer_.get()); }

 private:
  // Batches whose token count tp sequence parallel cannot split evenly (0 without it), and the
  // UserError for a non-zero count summed over the loss group.
  int64_t unsplittable_batches(const std::vector<Batch>& batches) const;
  void require_splittable(int64_t unsplittable) const;
  // Collective: the name of the first parameter whose gradient holds a NaN or infinity, or "".
  std::string first_nonfinite_gradient();

  Ops& ops_;
  ProcessGroups& groups_;
  TrainerOptions options_;
  std::unique_ptr<ParallelModel> model_;
  std::unique_ptr<AdamW> optimizer_;
};

}  // namespace trlhpc
