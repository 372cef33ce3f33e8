// CPU offload (src/parallel/data_parallel/host_offload.hpp; DeepSpeed offload_optimizer / offload_param, FSDP
// fsdp_offload_params) on the CPU backend, where "device" memory is host memory and the staging copies
// are memcpy through the same Ops calls the CUDA backend queues on its stream:
//   - training with offload equals training without it bit for bit (loss, grad norm, eval loss, every
//     final parameter) for ZeRO-1/2 (offload optimizer) and ZeRO-3 (offload optimizer, offload
//     parameters), fp32 and --bf16, on the world's ranks (1 rank at np 1), with accumulation and
//     checkpointing, and hybrid sharding where the world splits in two;
//   - the measured accounting equals plan_memory's, and the device bytes fall by the moments
//     (offload optimizer) or by the parameter shard + moments (offload parameters), which go to host;
//   - a strategy refuses offload it cannot do (DDP; parameter offload below ZeRO-3) with a UserError
//     thrown on every rank from its constructor arguments alone.
#include <mpi.h>

#include <cstring>

#include "test_data_parallel_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/memory_plan.hpp"

namespace trlhpc {
namespace {

using testing::CurveOptions;
using testing::Layout;
using testing::world_size;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

struct Case {
  std::string model;
  DType compute;
};

class CpuOffload : public ::testing::TestWithParam<Case> {};

TEST_P(CpuOffload, TrainsBitForBitAsWithoutOffload) {
  const int world = world_size();
  HfModelDir dir(testing::tests_dir() + "/golden/" + GetParam().model + "/model");
  const UnitRangeSource weights = weights_from_hf_dir(dir);
  CurveOptions options;
  options.steps = 6;
  options.compute = GetParam().compute;
  const int accumulation = options.global_rows % (2 * world) == 0 ? 2 : 1;
  std::vector<Layout> layouts;
  for (ShardingKind kind : {ShardingKind::Zero1, ShardingKind::Zero2, ShardingKind::Zero3})
    for (Offload offload : {Offload::Optimizer, Offload::Parameters}) {
      if (offload == Offload::Parameters && kind != ShardingKind::Zero3) continue;
      Layout layout{kind, 1, world, accumulation, kind == ShardingKind::Zero3};
      layout.offload = offload;
      layouts.push_back(layout);
      if (world % 2 == 0) {  // hybrid: shards all-reduced across dp_replicate before the host step
        layout.dp_replicate = 2;
        layouts.push_back(layout);
      }
    }
  for (const Layout& offloaded : layouts) {
    Layout plain = offloaded;
    plain.offload = Offload::None;
    const testing::Curve want = [&] {
      ProcessGroups groups(Mesh(ParallelDims{plain.dp_replicate, -1}.resolved(world)), MPI_COMM_WORLD);
      return testing::train_curve(dir.config(), weights, groups, plain, options);
    }();
    ProcessGroups groups(Mesh(ParallelDims{offloaded.dp_replicate, -1}.resolved(world)), MPI_COMM_WORLD);
    const testing::Curve got = testing::train_curve(dir.config(), weights, groups, offloaded, options);
    const std::string name = offloaded.name(world) + (options.compute == DType::BF16 ? ", bf16" : ", fp32");
    ASSERT_EQ(got.steps.size(), want.steps.size());
    for (size_t s = 0; s < got.steps.size(); ++s) {
      EXPECT_TRUE(same_bits(got.steps[s].loss, want.steps[s].loss))
          << name << " step " << s << ": loss " << got.steps[s].loss << " vs " << want.steps[s].loss;
      EXPECT_TRUE(same_bits(got.steps[s].grad_norm, want.steps[s].grad_norm))
          << name << " step " << s << ": grad_norm " << got.steps[s].grad_norm << " vs " << want.steps[s].grad_norm;
    }
    EXPECT_TRUE(same_bits(got.eval_loss, want.eval_loss)) << name << ": eval loss";
    ASSERT_EQ(got.final_params.size(), want.final_params.size());
    for (size_t u = 0; u < got.final_params.size(); ++u)
      EXPECT_EQ(0, std::memcmp(got.final_params[u].data(), want.final_params[u].data(),
                               got.final_params[u].size() * sizeof(float)))
          << name << ": final parameters of unit " << u << " differ";
    // The run must have moved: a test of equal curves that never trained would prove nothing.
    EXPECT_NE(got.steps.front().loss, got.steps.back().loss) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CpuOffload,
                         ::testing::Values(Case{"qwen2_tiny", DType::F32}, Case{"qwen2_tiny", DType::BF16},
                                           Case{"llama_tiny", DType::F32}, Case{"llama_tiny", DType::BF16}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.model + (info.param.compute == DType::BF16 ? "_bf16" : "_fp32");
                         });

TEST(CpuOffloadMemory, DeviceBytesFallByWhatMovesToTheHost) {
  const int world = world_size();
  const ModelConfig config = HfModelDir(testing::tests_dir() + "/golden/qwen2_tiny/model").config();
  const ParallelDims dims = ParallelDims{}.resolved(world);
  for (ShardingKind kind : {ShardingKind::Zero1, ShardingKind::Zero2, ShardingKind::Zero3})
    for (Offload offload : {Offload::None, Offload::Optimizer, Offload::Parameters}) {
      if (offload == Offload::Parameters && kind != ShardingKind::Zero3) continue;
      ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
      auto ops = make_cpu_ops();
      TrainerOptions options;
      options.parallel.data_parallel.sharding = kind;
      options.parallel.data_parallel.offload = offload;
      Trainer trainer(config, *ops, groups, options);
      const std::string name = std::string(sharding_name(kind)) + ", offload " + offload_name(offload);
      const MemoryAccount got = trainer.memory(), want = plan_memory(config, dims, kind, offload);
      EXPECT_EQ(got.parameter_bytes, want.parameter_bytes) << name;
      EXPECT_EQ(got.gradient_bytes, want.gradient_bytes) << name;
      EXPECT_EQ(got.optimizer_bytes, want.optimizer_bytes) << name;
      EXPECT_EQ(got.host_bytes, want.host_bytes) << name;
      // What the plan says moves, against the sizes of the owned range computed here from the units.
      const MemoryAccount none = plan_memory(config, dims, kind);
      int64_t owned = 0;  // fp32 elements this rank's optimizer updates
      for (const OptimizerRange& r : trainer.model().sharded_state().owned_ranges()) owned += r.end - r.begin;
      const int64_t moments = 8 * owned, master = 4 * owned, staging = 4 * owned;
      const auto device = [](const MemoryAccount& m) { return m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes; };
      if (offload == Offload::None) {
        EXPECT_EQ(got.host_bytes, 0) << name;
        EXPECT_EQ(device(got), device(none)) << name;
      } else {
        // Optimizer: the moments leave the device (the device keeps its parameters to compute with);
        // Parameters: the fp32 shard (the master) leaves it too.
        const int64_t saved = offload == Offload::Parameters ? master + moments : moments;
        EXPECT_EQ(device(none) - device(got), saved) << name;
        EXPECT_EQ(got.device_bytes_saved, saved) << name;
        EXPECT_EQ(want.device_bytes_saved, saved) << name;
        EXPECT_EQ(got.host_bytes, master + moments + staging) << name;
      }
    }
}

TEST(CpuOffloadRefusal, StrategiesThatCannotOffloadRefuseOnEveryRank) {
  const int world = world_size();
  const ModelConfig config = HfModelDir(testing::tests_dir() + "/golden/qwen2_tiny/model").config();
  struct Bad {
    ShardingKind kind;
    Offload offload;
    const char* says;
  };
  for (const Bad& bad : {Bad{ShardingKind::None, Offload::Optimizer, "needs a sharded optimizer"},
                         Bad{ShardingKind::Zero1, Offload::Parameters, "parameter offload needs sharding zero3"},
                         Bad{ShardingKind::Zero2, Offload::Parameters, "parameter offload needs sharding zero3"}}) {
    ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
    auto ops = make_cpu_ops();
    TrainerOptions options;
    options.parallel.data_parallel.sharding = bad.kind;
    options.parallel.data_parallel.offload = bad.offload;
    try {
      Trainer trainer(config, *ops, groups, options);
      ADD_FAILURE() << sharding_name(bad.kind) << " accepted offload " << offload_name(bad.offload);
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace trlhpc
