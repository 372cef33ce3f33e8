#pragma once
// Shared pieces of the data-parallel tests: a deterministic synthetic global batch, a layout (mesh +
// sharding + accumulation), and a trainer run on it that returns the loss / grad-norm curve.
//
// Any split of the same global batch over dp ranks x accumulation micro-steps x rows per micro-batch
// must give the same curve (ARCHITECTURE.md sec. 1): the loss is the token mean over the whole global
// batch and gradients are plain sums, so only fp32 summation order differs between layouts.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc::testing {

// One row of `T` tokens: one or two documents (positions restart at each), sometimes right padding,
// sometimes a prompt whose first target is masked. Depends only on (seed, step, row).
inline Batch synthetic_row(int64_t T, int64_t vocab, uint64_t seed, int64_t step, int64_t row) {
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(step) * 1009ULL + static_cast<uint64_t>(row));
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Batch b;
  b.rows = 1;
  b.seq_len = T;
  int64_t t = 0;
  int32_t doc = 0;
  while (t < T) {
    const int64_t left = T - t;
    if (doc > 0 && uniform(0, 3) == 0) break;  // right padding for the rest of the row
    const int64_t len = std::min(left, uniform(2, T));
    const bool masked_prompt = uniform(0, 2) == 0;
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (int32_t& id : ids) id = static_cast<int32_t>(uniform(0, vocab - 1));
    for (int64_t i = 0; i < len; ++i) {
      b.input_ids.push_back(ids[static_cast<size_t>(i)]);
      const bool last = i + 1 == len;
      b.targets.push_back(last || (masked_prompt && i == 0) ? kIgnoreIndex : ids[static_cast<size_t>(i + 1)]);
      b.positions.push_back(static_cast<int32_t>(i));
      b.doc_ids.push_back(doc);
    }
    t += len;
    ++doc;
  }
  for (; t < T; ++t) {
    b.input_ids.push_back(0);
    b.targets.push_back(kIgnoreIndex);
    b.positions.push_back(0);
    b.doc_ids.push_back(kPaddingDocId);
  }
  return b;
}

inline Batch concat_rows(const std::vector<Batch>& rows) {
  Batch out;
  out.seq_len = rows.front().seq_len;
  for (const Batch& r : rows) {
    out.input_ids.insert(out.input_ids.end(), r.input_ids.begin(), r.input_ids.end());
    out.targets.insert(out.targets.end(), r.targets.begin(), r.targets.end());
    out.positions.insert(out.positions.end(), r.positions.begin(), r.positions.end());
    out.doc_ids.insert(out.doc_ids.end(), r.doc_ids.begin(), r.doc_ids.end());
    out.rows += r.rows;
  }
  return out;
}

// How a run splits the work: mesh, sharding profile, accumulation, checkpointing.
struct Layout {
  ShardingKind sharding = ShardingKind::None;
  int dp_replicate = 1;      // dp_shard = ranks / dp_replicate
  int ranks = 0;             // data-parallel ranks (0: the whole world); the world splits into groups
                             // of this many ranks that each train the same curve
  int accumulation = 1;      // micro-steps per optimizer step
  bool checkpointing = false;
  int64_t bucket_elements = 1000;  // small DDP buckets: several per unit
  bool reshard_after_forward = true;  // ZeRO-3: false keeps units gathered from forward to backward
  Offload offload = Offload::None;     // CPU offload of the optimizer state (and ZeRO-3's parameter shards)

  std::string name(int world) const {
    const int n = ranks > 0 ? ranks : world;
    return std::to_string(n) + " ranks, " + sharding_name(sharding) + ", dp_replicate " + std::to_string(dp_replicate) + " x dp_shard " +
           std::to_string(n / dp_replicate) + ", accumulation " + std::to_string(accumulation) +
           (checkpointing ? ", checkpointing" : "") + (reshard_after_forward ? "" : ", no reshard after forward") +
           (offload == Offload::None ? "" : std::string(", offload ") + offload_name(offload));
  }
};

struct CurveOptions {
  int64_t global_rows = 16, seq_len = 12, steps = 10;
  uint64_t data_seed = 7;
  double lr = 1e-2;
  DType compute = DType::F32;  // the CPU backend's compute dtype (BF16: --bf16)
  TokenLoss token_loss;        // label smoothing / DFT (kernels/token_loss.hpp); plain by default
};

struct Curve {
  std::vector<StepResult> steps;
  double eval_loss = 0;  // Trainer::evaluate on fresh rows after the last step
  std::vector<std::vector<float>> final_params;  // (units) each (numel) gathered full parameters
};

inline TrainerOptions trainer_options(const Layout& layout) {
  TrainerOptions o;
  o.parallel.data_parallel.sharding = layout.sharding;
  o.parallel.data_parallel.bucket_elements = layout.bucket_elements;
  o.parallel.data_parallel.reshard_after_forward = layout.reshard_after_forward;
  o.parallel.data_parallel.offload = layout.offload;
  o.adamw.weight_decay = 0.1f;
  o.max_grad_norm = 1.0;
  o.parallel.gradient_checkpointing = layout.checkpointing;
  o.parallel.loss_chunk_tokens = 7;
  return o;
}

// Trains `options.steps` steps of the synthetic global batch on `groups`; dp rank d, micro-step a
// takes global rows [(a*D + d)*R, +R) with D = |dp| and R = global_rows / (D * accumulation).
inline Curve train_curve(const ModelConfig& config, const UnitRangeSource& weights, ProcessGroups& groups,
                         const Layout& layout, const CurveOptions& options) {
  auto ops = make_cpu_ops(options.compute);
  TrainerOptions trainer_opts = trainer_options(layout);
  trainer_opts.parallel.token_loss = options.token_loss;
  Trainer trainer(config, *ops, groups, trainer_opts);
  trainer.model().load_weights(weights);
  const int64_t D = groups.dp().size(), d = groups.dp().rank(), A = layout.accumulation;
  const int64_t R = options.global_rows / (D * A);
  Curve curve;
  for (int64_t s = 0; s < options.steps; ++s) {
    std::vector<Batch> micro;
    for (int64_t a = 0; a < A; ++a) {
      std::vector<Batch> rows;
      for (int64_t i = 0; i < R; ++i)
        rows.push_back(synthetic_row(options.seq_len, config.vocab_size, options.data_seed, s, (a * D + d) * R + i));
      micro.push_back(concat_rows(rows));
    }
    curve.steps.push_back(trainer.step(micro, options.lr));
  }
  std::vector<Batch> eval;  // dp rank d evaluates rows d, d + D, ... of a fresh global batch
  for (int64_t row = d; row < options.global_rows; row += D)
    eval.push_back(synthetic_row(options.seq_len, config.vocab_size, options.data_seed + 1, 0, row));
  curve.eval_loss = trainer.evaluate(eval);
  trainer.model().sharded_state().gather_full_parameters();
  for (ParameterUnit& unit : trainer.model().store().units()) {
    std::vector<float> host(static_cast<size_t>(unit.numel));
    ops->copy_to_host(host.data(), unit.params, host.size() * sizeof(float));
    curve.final_params.push_back(std::move(host));
  }
  trainer.model().sharded_state().release_full_parameters();
  return curve;
}

// The single-process reference: every rank computes it alone on MPI_COMM_SELF (DDP over one rank,
// the whole global batch as one micro-batch).
inline Curve reference_curve(const ModelConfig& config, const UnitRangeSource& weights, const CurveOptions& options) {
  ProcessGroups self(Mesh(ParallelDims{}.resolved(1)), MPI_COMM_SELF);
  return train_curve(config, weights, self, Layout{}, options);
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline double relative_difference(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-30);
}

}  // namespace trlhpc::testing
