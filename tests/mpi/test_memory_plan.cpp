// plan_memory (what `trlhpc env --model` prints) equals the bytes the trainer's strategies actually
// allocate for every sharding kind on the world's layout (and with tp 2 where the world allows).
#include <mpi.h>

#include "test_support.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/parallel/memory_plan.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

TEST(MemoryPlan, EqualsTheStrategiesAccounting) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const ModelConfig config = HfModelDir(testing::tests_dir() + "/golden/qwen2_tiny/model").config();
  std::vector<ParallelDims> layouts = {ParallelDims{}.resolved(world)};
  if (world % 2 == 0) layouts.push_back(ParallelDims{1, -1, 1, 1, 2}.resolved(world));
  for (const ParallelDims& dims : layouts)
    for (ShardingKind kind : {ShardingKind::None, ShardingKind::Zero1, ShardingKind::Zero2, ShardingKind::Zero3}) {
      ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
      auto ops = make_cpu_ops();
      TrainerOptions options;
      options.parallel.data_parallel.sharding = kind;
      Trainer trainer(config, *ops, groups, options);
      const MemoryAccount got = trainer.memory(), want = plan_memory(config, dims, kind);
      if (groups.tp().rank() != 0) continue;  // the plan describes tp rank 0 (it also holds replicated tensors)
      EXPECT_EQ(got.parameter_bytes, want.parameter_bytes) << dims.to_string() << " " << sharding_name(kind);
      EXPECT_EQ(got.gradient_bytes, want.gradient_bytes) << dims.to_string() << " " << sharding_name(kind);
      EXPECT_EQ(got.optimizer_bytes, want.optimizer_bytes) << dims.to_string() << " " << sharding_name(kind);
    }
}

}  // namespace
}  // namespace trlhpc
