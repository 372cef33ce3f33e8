#pragma once
// Deterministic distributed sampler: which rows (packed rows, or examples when not packing) each rank
// trains on at each micro-step.
//
// The rows of optimizer step `step` of epoch `epoch` depend only on (seed, num_rows, global batch size,
// epoch, step), never on the layout, so 8x1x1, 2x4x1 and 1x4x2 (per_device x dp x accumulation) train on
// the same rows per step, every rank computes its share without communication, and resuming from
// (epoch, step) replays exactly the rest.
//
//   order(epoch)   = Fisher-Yates permutation of 0..N-1 driven by splitmix64 seeded from (seed, epoch)
//                    (identity when shuffle is off: rows in file/packing order)
//   kept rows      N' = N (drop_last = false, HF's default), or N rounded down to a multiple of
//                    B' = per_device x dp (drop_last = true: HF's DataLoader drops the incomplete last
//                    micro-batch of a single process whose batch is B')
//   global batch   = order(epoch)[step*G, step*G + R), G = per_device x dp x accumulation,
//                    R = G for a full step, N' - step*G for the partial last step
//   slot s = micro_step * dp + dp_rank (s in 0..dp*accumulation-1) takes global-batch positions
//                    [floor(s*R/S), floor((s+1)*R/S)), S = dp x accumulation
// so the union of all slots is the global batch, and a full step gives every slot per_device rows.
//
// Partial last batch: HF's Trainer keeps it (dataloader_drop_last=False, the default here too). The
// last step is split as evenly as the formula above allows: every rank still runs `accumulation`
// micro-steps, but some micro-batches hold fewer rows and, when R < S, some are EMPTY (the trainer must
// still run its collectives for them: sft_loop gives it a padding row). The loss stays the token mean
// over the whole global batch, which is what HF computes from num_items_in_batch, so how the rows are
// split does not change it.
//
// Steps and epochs as transformers' Trainer (4.57, set_initial_training_values and the epoch it logs)
// counts them for one process with batch B' (trlhpc's global batch is layout-independent, so that is
// the process HF's numbers are taken from): L = ceil(N' / B') micro-batches per epoch, steps per epoch
// ceil(L / accumulation) (= ceil(N' / G)), and the epoch logged after step u (1-based within epoch e)
// e + min(u x accumulation, L) / L.
//
// Evaluation (eval_micro_batches) uses every eval row exactly once, unshuffled: row i goes to dp rank
// i mod dp, and each rank cuts its rows, in order, into micro-batches of the training micro-batch size.
// Ranks may then hold different numbers of micro-batches (e.g. 5 rows, dp 2, batch 2: rank 0 has {0, 2},
// {4}; rank 1 has {1, 3}), but every rank must run the same number of forwards because sharded
// strategies gather parameters inside them, so the ones with fewer pad with padding_batch (batch.hpp).
#include <cstdint>
#include <vector>

namespace trlhpc::batching {

// One draw of the splitmix64 generator (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): advances `state` and returns 64 well-mixed bits.
uint64_t splitmix64_next(uint64_t& state);

// Permutation of 0..n-1 for (seed, epoch): Fisher-Yates with unbiased bounded draws (Lemire's multiply-shift
// with rejection) from splitmix64 seeded by mixing seed and epoch. Identical on every platform and rank.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

struct SamplerConfig {
  int64_t num_rows = 0;                     // N: packed rows (or examples when not packing)
  int64_t per_device_batch_size = 8;        // --per_device_train_batch_size
  int64_t dp = 1;                           // data-parallel ranks (dp_replicate x dp_shard)
  int64_t gradient_accumulation_steps = 1;  // --gradient_accumulation_steps
  uint64_t seed = 42;                       // --seed
  bool shuffle = true;                      // --shuffle_dataset
  bool drop_last = false;                   // --dataloader_drop_last (see above)
};

// Where training stands in the data: resume from here.
struct SamplerPosition {
  int64_t epoch = 0;
  int64_t step = 0;  // optimizer step within the epoch
  bool operator==(const SamplerPosition&) const = default;
};

class DistributedSampler {
 public:
  // UserError when a size is < 1, or when drop_last leaves no row (fewer than per_device x dp rows).
  explicit DistributedSampler(SamplerConfig config);

  int64_t global_batch_size() const { return global_batch_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t rows_per_epoch() const { return kept_rows_; }  // N'
  const SamplerConfig& config() const { return config_; }

  // Epoch and step within it of the global optimizer step `global_step` (0-based).
  SamplerPosition position(int64_t global_step) const;
  // Inverse of position().
  int64_t global_step(SamplerPosition position) const;
  // The epoch HF's Trainer logs after global optimizer step `global_step` (0-based): see above.
  double epoch_after(int64_t global_step) const;

  // Rows of optimizer step `step` of `epoch`, in global-batch order.
  std::vector<int64_t> global_batch(int64_t epoch, int64_t step);
  // Rows of micro-step `micro_step` (0..accumulation-1) on data-parallel rank `dp_rank` (0..dp-1).
  std::vector<int64_t> micro_batch(int64_t epoch, int64_t step, int64_t micro_step, int64_t dp_rank);

  // The row order of an epoch (cached: consecutive calls for the same epoch cost nothing).
  const std::vector<int64_t>& epoch_order(int64_t epoch);

 private:
  void check_step(int64_t epoch, int64_t step) const;
  int64_t rows_in_step(int64_t step) const;

  SamplerConfig config_;
  int64_t global_batch_ = 0;
  int64_t kept_rows_ = 0;              // N'
  int64_t micro_batches_per_epoch_ = 0;  // L
  int64_t steps_per_epoch_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_order_;  // (N) permutation for cached_epoch_
};

// One dp rank's share of an evaluation (see the top of this file).
struct EvalPlan {
  std::vector<std::vector<int64_t>> micro_batches;  // this rank's row lists, in order
  // Forwards EVERY rank runs: the most micro-batches any rank holds. Rank 0 holds the most rows
  // (ceil(rows / dp)), so this is ceil(ceil(rows / dp) / batch_size), known without communication;
  // a rank pads micro_batch_count - micro_batches.size() padding batches.
  int64_t micro_batch_count = 0;
};

// The eval rows [0, rows) of dp rank `dp_rank` of `dp_size`, in micro-batches of `batch_size` rows.
// UserError when rows < 0, dp_size < 1, dp_rank is outside [0, dp_size) or batch_size < 1.
EvalPlan eval_micro_batches(int64_t rows, int64_t dp_size, int64_t dp_rank, int64_t batch_size);

}  // namespace trlhpc::batching
