// Layout equivalence of the data-parallel profiles (ARCHITECTURE.md sec. 1 invariant): DDP, ZeRO-1,
// ZeRO-2, ZeRO-3 and hybrid (dp_replicate 2 x dp_shard N/2), with and without gradient checkpointing
// and accumulation, and per-device x dp x accumulation splits of the same global batch (16 rows: e.g.
// 8x1x2 = 2x4x2 = 1x8x2 = 1x4x4 on 8 ranks, smaller dp on sub-groups of the world), train 10
// AdamW steps (clipping and weight decay active) on qwen2_tiny (untied head), qwen3_tiny (q/k norms,
// tied), qwen3_sliding_tiny (sliding-window layers), gemma3_tiny (Gemma 3: (1 + w) norms around
// attention and MLP, GeGLU, scaled embeddings), gemma2_tiny (Gemma 2: softcapped attention scores and
// logits) and llama_tiny (tied embeddings) and must
// reproduce the loss and grad-norm curve of a single-process run that each rank computes itself on MPI_COMM_SELF.
//
// After the steps, Trainer::evaluate (forward only: ZeRO-3 gathers and frees without a backward) on a
// fresh batch dealt over the dp ranks must give the reference's eval loss.
// Bound: relative 1e-5 on loss and grad norm at every step and on the eval loss; the final (gathered) parameters of each
// unit within 1e-3 normalised error (||got - want|| / ||want||). Only fp32 summation order differs between
// layouts; the worst deviations measured are printed by rank 0 (see the final report for values).
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "test_data_parallel_support.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {
namespace {

using testing::CurveOptions;
using testing::Layout;
using testing::world_size;

std::vector<Layout> layouts_for(int world, int64_t global_rows) {
  std::vector<Layout> layouts;
  const ShardingKind kinds[] = {ShardingKind::None, ShardingKind::Zero1, ShardingKind::Zero2, ShardingKind::Zero3};
  const bool accumulate = global_rows % (2 * world) == 0;
  for (ShardingKind kind : kinds) {
    layouts.push_back({kind, 1, world, 1, false});
    layouts.push_back({kind, 1, world, accumulate ? 2 : 1, true});
    // Hybrid: sharded within dp_shard, replicated across dp_replicate (dp_shard 1 on two ranks: the
    // degenerate case takes the same path).
    if (kind != ShardingKind::None && world % 2 == 0) layouts.push_back({kind, 2, world, accumulate ? 2 : 1, false});
  }
  Layout kept_gathered{ShardingKind::Zero3, 1, world, accumulate ? 2 : 1, true};
  kept_gathered.reshard_after_forward = false;
  layouts.push_back(kept_gathered);
  // Splits of the same global batch, rows per device x dp x accumulation: every dp size the world
  // allows (smaller groups train side by side), each with 1 micro-step, 2, and one row per micro-step.
  for (ShardingKind kind : {ShardingKind::None, ShardingKind::Zero3})
    for (int ranks = world; ranks >= 1; ranks /= 2) {
      if (world % ranks != 0 || global_rows % ranks != 0) continue;
      const int one_row = static_cast<int>(global_rows / ranks);
      for (int a : {1, 2, one_row})
        if (global_rows % (static_cast<int64_t>(a) * ranks) == 0 && !(ranks == world && a <= 2))
          layouts.push_back({kind, 1, ranks, a, false});
    }
  return layouts;
}

class DataParallelEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(DataParallelEquivalence, EveryLayoutMatchesTheSingleProcessCurve) {
  const int world = world_size();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  HfModelDir dir(testing::tests_dir() + "/golden/" + GetParam() + "/model");
  const UnitRangeSource weights = weights_from_hf_dir(dir);
  CurveOptions options;
  const testing::Curve reference = testing::reference_curve(dir.config(), weights, options);

  double worst_loss = 0, worst_norm = 0, worst_param = 0, worst_eval = 0;
  int layouts_run = 0;
  for (const Layout& layout : layouts_for(world, options.global_rows)) {
    const MpiComm ranks = MpiComm::split(MPI_COMM_WORLD, rank / layout.ranks, rank);
    ProcessGroups groups(Mesh(ParallelDims{layout.dp_replicate, -1}.resolved(layout.ranks)), ranks.get());
    const testing::Curve curve = testing::train_curve(dir.config(), weights, groups, layout, options);
    ASSERT_EQ(curve.steps.size(), reference.steps.size());
    ++layouts_run;
    for (size_t s = 0; s < curve.steps.size(); ++s) {
      const StepResult& got = curve.steps[s];
      const StepResult& want = reference.steps[s];
      EXPECT_EQ(got.target_tokens, want.target_tokens) << layout.name(world) << " step " << s;
      const double dl = testing::relative_difference(got.loss, want.loss);
      const double dn = testing::relative_difference(got.grad_norm, want.grad_norm);
      worst_loss = std::max(worst_loss, dl);
      worst_norm = std::max(worst_norm, dn);
      EXPECT_LE(dl, 1e-5) << layout.name(world) << " step " << s << ": loss " << got.loss << " vs " << want.loss;
      EXPECT_LE(dn, 1e-5) << layout.name(world) << " step " << s << ": grad_norm " << got.grad_norm << " vs "
                          << want.grad_norm;
    }
    const double de = testing::relative_difference(curve.eval_loss, reference.eval_loss);
    worst_eval = std::max(worst_eval, de);
    EXPECT_LE(de, 1e-5) << layout.name(world) << ": eval loss " << curve.eval_loss << " vs " << reference.eval_loss;
    for (size_t u = 0; u < reference.final_params.size(); ++u) {
      // Normalised error per unit: a few elements whose exact gradient is zero (e.g. key biases on
      // RoPE's near-zero frequencies, where softmax is shift invariant) carry only rounding noise, which
      // Adam normalises to steps of +-lr; an element-wise bound would measure that noise, not sharding.
      const std::vector<float>& want = reference.final_params[u];
      const std::vector<float>& got = curve.final_params[u];
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
      }
      const double error = std::sqrt(diff / std::max(norm, 1e-30));
      worst_param = std::max(worst_param, error);
      EXPECT_LE(error, 1e-3) << layout.name(world) << " unit " << u << ": ||final - reference|| / ||reference||";
    }
  }
  if (rank == 0)
    std::printf("[ measured ] %s on %d ranks, %d layouts: worst relative deviation loss %.2e, grad_norm %.2e, "
                "eval loss %.2e, parameters %.2e\n", GetParam().c_str(), world, layouts_run, worst_loss, worst_norm,
                worst_eval, worst_param);
}

INSTANTIATE_TEST_SUITE_P(Models, DataParallelEquivalence, ::testing::Values("qwen2_tiny", "llama_tiny", "qwen3_tiny",
                                                                              "qwen3_sliding_tiny", "gemma3_tiny",
                                                                              "gemma2_tiny"));

}  // namespace
}  // namespace trlhpc
