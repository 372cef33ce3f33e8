// Context parallel (ring attention) and Ulysses sequence parallel through the trainer: 10 AdamW steps
// of qwen2_tiny (NH 4, KVH 2; a subset of the layouts for qwen3_tiny, q/k norms) on cp 2/4 and sp 2/4,
// the cp x sp hybrid (Ulysses inside ring attention: cp 2 x sp 2, cp 2 x sp 4), alone and under dp
// (DDP and ZeRO), reproduce the single-process loss and grad-norm curves, computed in the same test on
// MPI_COMM_SELF.
//
// Every layout whose size divides the world runs (the world splits into groups of that size that each
// train the whole curve), so np 1 checks the reference path and np 8 runs every layout. The global
// batch (8 rows of 30 tokens, not a multiple of 2*cp, so rows are padded) is dealt to dp ranks and
// accumulation steps, then each micro-batch is sharded by the rank's cp/sp coordinate as sft_job does.
// Rows hold one document each ("unpacked") or several packed documents, with right padding. Sliding
// windows: qwen3_sliding_tiny and mistral_tiny on cp 2/4, sp 2, cp 2 x sp 2 and ZeRO-3 x cp 2.
// Bound: loss and grad norm within 1e-5 relative at every step; the sequence split changes only the
// fp32 summation order (printed as "[ measured ]").
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <random>

#include "test_support.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/parallel/sequence/sequence_shard.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

constexpr int64_t kRows = 8, kSeqLen = 30, kSteps = 10;
constexpr double kBound = 1e-5;

// Row `row` of step `step`: documents of random lengths (several when packed, one otherwise), some
// prompt tokens without target, right padding on some rows.
Batch training_row(int64_t vocab, bool packed, int64_t step, int64_t row) {
  std::mt19937_64 rng(977 * static_cast<uint64_t>(step) + static_cast<uint64_t>(row) + (packed ? 5 : 0));
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Batch b;
  b.rows = 1;
  b.seq_len = kSeqLen;
  const int64_t used = uniform(0, 2) == 0 ? uniform(kSeqLen / 2, kSeqLen) : kSeqLen;
  int32_t doc = 0;
  for (int64_t t = 0; t < used; ++doc) {
    const int64_t len = packed ? std::min(used - t, uniform(1, 13)) : used;
    const int64_t prompt = uniform(0, len / 2);
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (int32_t& id : ids) id = static_cast<int32_t>(uniform(0, vocab - 1));
    for (int64_t i = 0; i < len; ++i, ++t) {
      b.input_ids.push_back(ids[static_cast<size_t>(i)]);
      b.targets.push_back(i + 1 < len && i + 1 >= prompt ? ids[static_cast<size_t>(i + 1)] : kIgnoreIndex);
      b.positions.push_back(static_cast<int32_t>(i));
      b.doc_ids.push_back(doc);
    }
  }
  for (int64_t t = used; t < kSeqLen; ++t) {
    b.input_ids.push_back(0), b.targets.push_back(kIgnoreIndex), b.positions.push_back(0);
    b.doc_ids.push_back(kPaddingDocId);
  }
  return b;
}

Batch rows_batch(int64_t vocab, bool packed, int64_t step, int64_t first, int64_t count) {
  Batch out;
  out.seq_len = kSeqLen;
  for (int64_t r = first; r < first + count; ++r) {
    const Batch row = training_row(vocab, packed, step, r);
    for (auto array : {&Batch::input_ids, &Batch::targets, &Batch::positions, &Batch::doc_ids})
      (out.*array).insert((out.*array).end(), (row.*array).begin(), (row.*array).end());
    ++out.rows;
  }
  return out;
}

struct SpLayout {
  int dp_replicate = 1, dp_shard = 1, cp = 1, sp = 1;
  ShardingKind sharding = ShardingKind::None;
  int accumulation = 1;
  bool checkpointing = false;
  bool packed = true;

  int size() const { return dp_replicate * dp_shard * cp * sp; }
  std::string name() const {
    return "dp_replicate " + std::to_string(dp_replicate) + " x dp_shard " + std::to_string(dp_shard) + " x cp " +
           std::to_string(cp) + " x sp " + std::to_string(sp) + ", " + sharding_name(sharding) + ", accumulation " +
           std::to_string(accumulation) + (checkpointing ? ", checkpointing" : "") + (packed ? ", packed" : ", unpacked");
  }
};

std::vector<StepResult> train_curve(const ModelConfig& config, const UnitRangeSource& weights, const SpLayout& layout,
                                    MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const ParallelDims dims =
      ParallelDims{layout.dp_replicate, layout.dp_shard, layout.cp, layout.sp, 1}.resolved(size);
  ProcessGroups groups(Mesh(dims), comm);
  auto ops = make_cpu_ops();
  TrainerOptions options;
  options.parallel.data_parallel.sharding = layout.sharding;
  options.parallel.data_parallel.bucket_elements = 1000;
  options.adamw.weight_decay = 0.1f;
  options.max_grad_norm = 1.0;
  options.parallel.gradient_checkpointing = layout.checkpointing;
  options.parallel.loss_chunk_tokens = 7;
  Trainer trainer(config, *ops, groups, options);
  ParallelModel& model = trainer.model();
  model.load_weights(weights);

  const int64_t D = groups.dp().size(), d = groups.dp().rank(), A = layout.accumulation, R = kRows / (D * A);
  std::vector<StepResult> curve;
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<Batch> micro;
    for (int64_t a = 0; a < A; ++a)
      micro.push_back(model.shard_tokens(rows_batch(config.vocab_size, layout.packed, step, (a * D + d) * R, R)));
    curve.push_back(trainer.step(micro, 1e-2));
  }
  return curve;
}

double relative(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); }

// later_bound: the bound after step 0 (kBound unless a model's curve amplifies rounding, see its test).
void expect_layouts_match(const std::string& model, const std::vector<SpLayout>& layouts,
                          double later_bound = kBound) {
  HfModelDir dir(testing::tests_dir() + "/golden/" + model + "/model");
  const ModelConfig& config = dir.config();
  const UnitRangeSource weights = weights_from_hf_dir(dir);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  // The single-process curves, packed and unpacked (LocalAttention, no sharding).
  const std::vector<StepResult> reference[2] = {train_curve(config, weights, SpLayout{.packed = false}, MPI_COMM_SELF),
                                                train_curve(config, weights, SpLayout{.packed = true}, MPI_COMM_SELF)};
  double worst_loss = 0, worst_norm = 0, worst_first = 0;
  for (const SpLayout& layout : layouts) {
    if (world % layout.size() != 0) continue;
    SCOPED_TRACE(layout.name());
    const MpiComm group = MpiComm::split(MPI_COMM_WORLD, rank / layout.size(), rank % layout.size());
    const std::vector<StepResult> curve = train_curve(config, weights, layout, group.get());
    const std::vector<StepResult>& want = reference[layout.packed ? 1 : 0];
    for (int64_t s = 0; s < kSteps; ++s) {
      const StepResult& got = curve[static_cast<size_t>(s)];
      const StepResult& ref = want[static_cast<size_t>(s)];
      EXPECT_EQ(got.target_tokens, ref.target_tokens) << "step " << s;
      EXPECT_EQ(got.tokens, ref.tokens) << "step " << s;
      // The MFU FLOP count (train/flops.hpp): each cp/sp shard counts its tokens' causal pairs, and the
      // sum over the loss group is the single process's, packed or padded, sliding or full.
      EXPECT_EQ(got.attended_pairs, ref.attended_pairs) << "step " << s;
      EXPECT_GT(got.attended_pairs, 0) << "step " << s;
      const double bound = s == 0 ? kBound : later_bound;
      EXPECT_LE(relative(got.loss, ref.loss), bound) << "step " << s << ": " << got.loss << " vs " << ref.loss;
      EXPECT_LE(relative(got.grad_norm, ref.grad_norm), bound) << "step " << s << ": " << got.grad_norm << " vs "
                                                             << ref.grad_norm;
      worst_loss = std::max(worst_loss, relative(got.loss, ref.loss));
      worst_norm = std::max(worst_norm, relative(got.grad_norm, ref.grad_norm));
      if (s == 0)
        worst_first = std::max({worst_first, relative(got.loss, ref.loss), relative(got.grad_norm, ref.grad_norm)});
    }
  }
  // The curve must actually move (the test would be vacuous on a constant loss).
  EXPECT_LT(reference[1].back().loss, reference[1].front().loss);
  double worst[3] = {worst_loss, worst_norm, worst_first};
  MPI_Allreduce(MPI_IN_PLACE, worst, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("[ measured ] %s: worst relative difference over all layouts and steps: loss %.3g, "
                "grad norm %.3g (step 0: %.3g)\n", model.c_str(), worst[0], worst[1], worst[2]);
}

using SK = ShardingKind;

TEST(SequenceParallelTraining, LayoutsMatchSingleProcessCurves) {
  const std::vector<SpLayout> layouts = {
      {.cp = 2, .packed = false},
      {.cp = 2, .checkpointing = true, .packed = false},
      {.cp = 2},
      {.cp = 2, .checkpointing = true},
      {.sp = 2, .packed = false},
      {.sp = 2, .checkpointing = true, .packed = false},
      {.sp = 2},
      {.sp = 2, .checkpointing = true},
      {.cp = 4},
      {.cp = 4, .checkpointing = true, .packed = false},
      {.sp = 4, .checkpointing = true},  // KVH 2 < sp 4: kv heads repeated
      {.sp = 4, .packed = false},
      {.cp = 2, .accumulation = 2},
      {.dp_shard = 2, .cp = 2, .sharding = SK::Zero3},
      {.dp_shard = 2, .sp = 2, .sharding = SK::Zero2, .accumulation = 2, .checkpointing = true},
      {.dp_shard = 2, .cp = 2, .packed = false},
      {.dp_replicate = 2, .dp_shard = 2, .sp = 2, .sharding = SK::Zero3},
      {.dp_replicate = 2, .dp_shard = 2, .cp = 2, .checkpointing = true, .packed = false},
      {.dp_shard = 2, .cp = 4, .sharding = SK::Zero1},
      // cp x sp hybrid: Ulysses inside, ring across.
      {.cp = 2, .sp = 2},
      {.cp = 2, .sp = 2, .checkpointing = true, .packed = false},
      {.cp = 2, .sp = 2, .accumulation = 2},
      {.dp_shard = 2, .cp = 2, .sp = 2, .sharding = SK::Zero3},
      {.cp = 2, .sp = 4},  // KVH 2 < sp 4: kv heads repeated, ring over the repeated heads
      {.dp_replicate = 2, .cp = 2, .sp = 2, .accumulation = 2},
  };
  expect_layouts_match("qwen2_tiny", layouts);
}

// Qwen3's q/k norms act per token before attention, so ring attention and Ulysses need nothing of their
// own: the cheapest layouts that cover both (and their hybrid, checkpointing, kv heads repeated by
// sp 4 > KVH 2) must match too.
TEST(SequenceParallelTraining, Qwen3LayoutsMatchSingleProcessCurves) {
  const std::vector<SpLayout> layouts = {
      {.cp = 2, .checkpointing = true},
      {.sp = 2, .packed = false},
      {.cp = 2, .sp = 2, .checkpointing = true, .packed = false},
      {.sp = 4},
      {.dp_shard = 2, .cp = 2, .sp = 2, .sharding = SK::Zero3},
  };
  expect_layouts_match("qwen3_tiny", layouts);
}

// Sliding windows (qwen3_sliding_tiny: window 4 on layers 1-2; mistral_tiny: window 3 on every layer,
// documents of up to 30 tokens): ring attention skips the chunk pairs entirely outside the window and
// masks the rest, Ulysses hands the window to the local kernel; both must match one process.
// Step 0 (the first forward/backward, before any update) is held to kBound: measured 1.8e-8 on the
// grad norm, where a window off by one moves it by ~1e-2. The later steps drift as fp32 rounding
// (different summation order) is amplified by these windowed tiny models' AdamW updates under
// clipping: 6e-7 after one step, growing to 1.8e-4 by step 9 even for Ulysses, whose attention is
// the local kernel on the same rows; they are held to 1e-3.
TEST(SequenceParallelTraining, SlidingWindowLayoutsMatchSingleProcessCurves) {
  const std::vector<SpLayout> layouts = {
      {.cp = 2},
      {.cp = 2, .packed = false},
      {.sp = 2},
      {.cp = 4, .checkpointing = true},
      {.cp = 2, .sp = 2, .packed = false},
      {.dp_shard = 2, .cp = 2, .sharding = SK::Zero3},
  };
  expect_layouts_match("qwen3_sliding_tiny", layouts, 1e-3);
  expect_layouts_match("mistral_tiny", layouts, 1e-3);
}

// Gemma 3 (sliding layers with window 3 and their own RoPE base, full layers with linear-scaled RoPE,
// query_pre_attn_scalar): ring attention and Ulysses see only per-layer mask, scale and rotation
// properties. Held to the default 1e-5 at every step (measured <= 1.9e-6 on np 4).
TEST(SequenceParallelTraining, Gemma3LayoutsMatchSingleProcessCurves) {
  const std::vector<SpLayout> layouts = {
      {.cp = 2},
      {.sp = 2, .packed = false},
      {.cp = 2, .sp = 2, .checkpointing = true},
      {.dp_shard = 2, .cp = 2, .sharding = SK::Zero3},
  };
  expect_layouts_match("gemma3_tiny", layouts);  // measured 1.9e-6 at np 4 (10 steps)
}

// Gemma 2 (attention scores softcapped at 2, final logits at 3; window 3 on layers 0 and 2): ring
// attention caps each K/V block's scores in the kernel before its log-sum-exp merge and recomputes the
// cap's derivative from the global lse in the backward; Ulysses hands the cap to the local kernel.
// Step 0 is held to kBound (measured 1.7e-8 at np 2 and 4); the later steps to 1e-3 as the sliding models
// above: this fixture amplifies fp32 rounding through AdamW (measured up to 8.3e-5 on the grad norm at
// np 4, 4.2e-6 at np 2; the same weights without the caps drift further, see
// TensorParallelTraining.Gemma2TinyMatchesTheSingleProcessCurve).
TEST(SequenceParallelTraining, Gemma2LayoutsMatchSingleProcessCurves) {
  const std::vector<SpLayout> layouts = {
      {.cp = 2},
      {.sp = 2, .packed = false},
      {.cp = 2, .sp = 2, .checkpointing = true},
      {.dp_shard = 2, .cp = 2, .sharding = SK::Zero3},
      {.cp = 4, .checkpointing = true},
  };
  expect_layouts_match("gemma2_tiny", layouts, 1e-3);
}

}  // namespace
}  // namespace trlhpc
