#include "trlhpc/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/flops.hpp"

namespace trlhpc {

Trainer::Trainer(const ModelConfig& config, Ops& ops, ProcessGroups& groups, const TrainerOptions& options)
    : ops_(ops), groups_(groups), options_(options), model_(parallelize(config, ops, groups, options.parallel)) {
  // CPU offload: the moments on the host, stepped by the CPU kernel on the host tensors the strategy's
  // owned_params / owned_grads then give (src/parallel/data_parallel/host_offload.hpp).
  const OptimizerHome home =
      options.parallel.data_parallel.offload == Offload::None ? OptimizerHome::Device : OptimizerHome::Host;
  optimizer_ = std::make_unique<AdamW>(model_->store(), model_->sharded_state().owned_ranges(), options.adamw, ops, home);
}

Trainer::~Trainer() = default;

int64_t Trainer::unsplittable_batches(const std::vector<Batch>& batches) const {
  if (!model_->decoder().tp_sequence_parallel()) return 0;
  const int64_t tp = model_->decoder().tp_layout().size;
  int64_t bad = 0;
  for (const Batch& b : batches) bad += b.tokens() % tp != 0;
  return bad;
}

void Trainer::require_splittable(int64_t unsplittable) const {
  // The count is summed over the loss group, so every rank raises the same error, before any
  // collective of the forward could leave the others waiting.
  if (unsplittable == 0) return;
  throw UserError("tp_sequence_parallel: " + std::to_string(unsplittable) +
                  " micro-batch(es) hold a token count (rows x sequence length) not divisible by tp_size " +
                  std::to_string(model_->decoder().tp_layout().size) +
                  "; pad every row to a multiple of ParallelDims::sequence_multiple() (trlhpc sft does)");
}

namespace {
// One micro-batch's contribution to the metric sums: (entropy sum, top-1 count, valid targets, 1 when
// the backend computed them).
void add_token_metrics(const LossResult& r, double* q) {
  q[0] += r.metrics.entropy_sum;
  q[1] += static_cast<double>(r.metrics.top1);
  q[2] += static_cast<double>(r.target_tokens);
  q[3] += r.metrics.computed ? 1.0 : 0.0;
}
}  // namespace

StepResult Trainer::step(const std::vector<Batch>& micro_batches, double lr) {
  // N_global, the token count and the attended (query, key) pairs (the model FLOPs, flops.hpp), summed
  // over every rank that holds different tokens, with the micro-batches that tp sequence parallel
  // cannot split (checked on every rank at once).
  int64_t counts[4] = {0, 0, unsplittable_batches(micro_batches), 0};
  for (const Batch& b : micro_batches) {
    counts[0] += b.target_tokens();
    for (int32_t d : b.doc_ids) counts[1] += d != kPaddingDocId;
    counts[3] += attended_pairs(model_->config(), b);
  }
  groups_.loss().host().all_reduce(std::span<int64_t>(counts, 4));
  require_splittable(counts[2]);
  StepResult result;
  result.target_tokens = counts[0];
  result.tokens = counts[1];
  result.attended_pairs = counts[3];
  const float grad_scale = counts[0] > 0 ? 1.0f / static_cast<float>(counts[0]) : 0.0f;

  // sums[0]: the loss sum; then per micro-step (entropy sum, top-1 count, valid targets, metrics
  // computed), all reduced over the loss group in one call.
  const size_t M = micro_batches.size();
  std::vector<double> sums(1 + 4 * M, 0.0);
  std::vector<LossResult> pending;
  pending.reserve(M);
  for (size_t m = 0; m < M; ++m) {
    model_->strategy().begin_micro_step(m + 1 == M);
    const DeviceBatch batch = DeviceBatch::upload(micro_batches[m], ops_);
    pending.push_back(model_->decoder().forward_backward_deferred(batch, grad_scale));
  }
  model_->strategy().finish_gradients();
  // The loss sums are read back here, once per step (in micro-batch order, as they were added before).
  for (size_t m = 0; m < M; ++m) {
    LossResult& r = pending[m];
    r.resolve();
    sums[0] += r.loss_sum;
    add_token_metrics(r, &sums[1 + 4 * m]);
  }
  groups_.loss().host().all_reduce(std::span<double>(sums));
  result.loss = counts[0] > 0 ? sums[0] / static_cast<double>(counts[0]) : 0.0;
  result.micro_steps = static_cast<int64_t>(M);
  result.has_token_metrics = M > 0;
  for (size_t m = 0; m < M; ++m) {
    const double* q = &sums[1 + 4 * m];
    result.has_token_metrics = result.has_token_metrics && q[3] == static_cast<double>(groups_.loss().size());
    result.entropy_ratio_sum += q[2] > 0 ? q[0] / q[2] : 0.0;
    result.accuracy_ratio_sum += q[2] > 0 ? q[1] / q[2] : 0.0;
  }

  // Clipping as torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1.
  result.grad_norm = std::sqrt(model_->strategy().grad_norm_squared());
  if (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm)) {  // both are global values
    result.finite = false;
    result.first_nonfinite_gradient = first_nonfinite_gradient();
    model_->strategy().finish_step();  // gradients zeroed; no update happened
    return result;
  }
  if (options_.max_grad_norm > 0) {
    const double coef = options_.max_grad_norm / (result.grad_norm + 1e-6);
    if (coef < 1.0) model_->strategy().scale_owned_grads(static_cast<float>(coef));
  }
  ShardedStateView& state = model_->sharded_state();
  optimizer_->step(state.owned_params(), state.owned_grads(), static_cast<float>(lr), state.owned_compute());
  model_->strategy().finish_step();
  return result;
}

std::string Trainer::first_nonfinite_gradient() {
  ParameterStore& store = model_->store();
  const std::vector<OptimizerRange> ranges = model_->sharded_state().owned_ranges();
  const std::vector<Tensor> grads = model_->sharded_state().owned_grads();
  int64_t first = std::numeric_limits<int64_t>::max(), index = 0;
  std::vector<std::string> names;
  for (int u = 0; u < store.num_units(); ++u) {
    const OptimizerRange range = ranges[static_cast<size_t>(u)];
    std::vector<float> host(static_cast<size_t>(range.end - range.begin));
    ops_.copy_to_host(host.data(), grads[static_cast<size_t>(u)], host.size() * sizeof(float));
    for (const ParameterSlot& slot : store.unit(u).slots) {
      names.push_back(slot.spec.name);
      const int64_t lo = std::max(range.begin, slot.offset), hi = std::min(range.end, slot.offset + slot.numel);
      for (int64_t i = lo; i < hi && first > index; ++i)
        if (!std::isfinite(host[static_cast<size_t>(i - range.begin)])) first = index;
      ++index;
    }
  }
  groups_.world().host().all_reduce(std::span<int64_t>(&first, 1), ReduceOp::Min);
  return first < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(first)] : "";
}

double Trainer::evaluate(const std::vector<Batch>& batches) { return evaluate_unless(batches, {})->loss; }

std::optional<EvalResult> Trainer::evaluate_unless(const std::vector<Batch>& batches, const std::function<bool()>& stop) {
  int64_t unsplittable = unsplittable_batches(batches);
  groups_.loss().host().all_reduce(std::span<int64_t>(&unsplittable, 1));
  require_splittable(unsplittable);
  // loss sum, target tokens; then per batch (entropy sum, top-1 count, valid targets, computed)
  std::vector<double> sums(2 + 4 * batches.size(), 0.0);
  for (size_t k = 0; k < batches.size(); ++k) {
    if (stop && stop()) return std::nullopt;
    const DeviceBatch batch = DeviceBatch::upload(batches[k], ops_);
    const LossResult r = model_->decoder().forward_loss(batch);
    sums[0] += r.loss_sum;
    sums[1] += static_cast<double>(r.target_tokens);
    add_token_metrics(r, &sums[2 + 4 * k]);
  }
  groups_.loss().host().all_reduce(std::span<double>(sums));
  EvalResult result;
  result.loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  result.has_token_metrics = !batches.empty();
  for (size_t k = 0; k < batches.size(); ++k) {
    const double* q = &sums[2 + 4 * k];
    result.has_token_metrics = result.has_token_metrics && q[3] == static_cast<double>(groups_.loss().size());
    result.entropy += q[2] > 0 ? q[0] / q[2] : 0.0;
    result.mean_token_accuracy += q[2] > 0 ? q[1] / q[2] : 0.0;
  }
  if (!batches.empty()) {
    result.entropy /= static_cast<double>(batches.size());
    result.mean_token_accuracy /= static_cast<double>(batches.size());
  }
  return result;
}

}  // namespace trlhpc
