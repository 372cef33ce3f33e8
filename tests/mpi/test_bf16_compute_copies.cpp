// The bf16 compute copies of mixed precision (ParameterUnit::compute, docs/ARCHITECTURE.md "bf16
// compute copies") on the CPU backend, where they run the same code as on CUDA:
//   - the refresh rule: after loading and after every optimizer step, every full unit's copy equals
//     bf16(params) bit for bit under DDP (whose AdamW writes the copies in its own pass), ZeRO-1, ZeRO-2
//     and ZeRO-1 with optimizer offload (whose masters come back from the host); under ZeRO-3 (also with parameter offload) a unit gathered for compute
//     holds the gathered bf16 buffer as its copy, equal to bf16 of its fp32 view, and a released unit
//     holds none, so a pool buffer handed to the next unit never carries the previous unit's copy;
//   - the decoder computes with the copies: zeroing a layer's fp32 masters behind the store's back leaves
//     the evaluation loss unchanged bit for bit until the copy is refreshed, and then changes it (under
//     fp32, which keeps no copies, the same write changes the loss at once: the control);
//   - the copies are counted in the memory account, as plan_memory says.
#include <mpi.h>

#include <array>
#include <cstring>

#include "test_data_parallel_support.hpp"
#include "trlhpc/core/dtype.hpp"
#include "trlhpc/parallel/memory_plan.hpp"

namespace trlhpc {
namespace {

using testing::CurveOptions;
using testing::Layout;
using testing::world_size;

std::vector<float> host_f32(Ops& ops, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  ops.copy_to_host(out.data(), t, out.size() * sizeof(float));
  return out;
}

std::vector<uint16_t> host_bf16(Ops& ops, const Tensor& t) {
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  ops.copy_to_host(out.data(), t, out.size() * sizeof(uint16_t));
  return out;
}

// Elements of unit `u` whose copy is not bf16(params) (round to nearest even); -1: the unit has no copy.
int64_t stale_elements(Ops& ops, const ParameterUnit& unit) {
  if (!unit.compute.data()) return -1;
  EXPECT_EQ(unit.compute.dtype(), DType::BF16);
  EXPECT_EQ(unit.compute.numel(), unit.params.numel());
  const std::vector<float> master = host_f32(ops, unit.params);
  const std::vector<uint16_t> copy = host_bf16(ops, unit.compute);
  int64_t stale = 0;
  for (size_t i = 0; i < master.size(); ++i) stale += copy[i] != f32_to_bf16(master[i]);
  return stale;
}

std::vector<Batch> rows_for(const ModelConfig& config, ProcessGroups& groups, const CurveOptions& o, int64_t step,
                            int64_t A) {
  const int64_t D = groups.dp().size(), d = groups.dp().rank(), R = o.global_rows / (D * A);
  std::vector<Batch> micro;
  for (int64_t a = 0; a < A; ++a) {
    std::vector<Batch> rows;
    for (int64_t i = 0; i < R; ++i)
      rows.push_back(testing::synthetic_row(o.seq_len, config.vocab_size, o.data_seed, step, (a * D + d) * R + i));
    micro.push_back(testing::concat_rows(rows));
  }
  return micro;
}

HfModelDir tiny_model() { return HfModelDir(testing::tests_dir() + "/golden/qwen2_tiny/model"); }

// A --bf16 trainer of `layout` on the world's ranks, the tiny Qwen2 loaded.
struct Bf16Run {
  explicit Bf16Run(const Layout& layout)
      : dir(tiny_model()), config(dir.config()), groups(Mesh(ParallelDims{}.resolved(world_size())), MPI_COMM_WORLD),
        ops(make_cpu_ops(DType::BF16)), trainer(config, *ops, groups, testing::trainer_options(layout)) {
    trainer.model().load_weights(weights_from_hf_dir(dir));
  }
  ParameterStore& store() { return trainer.model().store(); }
  HfModelDir dir;
  ModelConfig config;
  ProcessGroups groups;
  std::unique_ptr<Ops> ops;
  Trainer trainer;
};

TEST(Bf16ComputeCopies, FullUnitsAreRefreshedAfterLoadAndEveryStep) {
  const int world = world_size();
  CurveOptions options;
  for (Layout layout : {Layout{ShardingKind::None}, Layout{ShardingKind::Zero1}, Layout{ShardingKind::Zero2},
                        Layout{ShardingKind::Zero1, 1, 0, 2}}) {
    if (layout.accumulation == 2) layout.offload = Offload::Optimizer;
    const std::string name = layout.name(world);
    Bf16Run run(layout);
    ParameterStore& store = run.store();
    Ops* ops = run.ops.get();
    Trainer& trainer = run.trainer;
    for (int u = 0; u < store.num_units(); ++u)
      EXPECT_EQ(stale_elements(*ops, store.unit(u)), 0) << name << ": unit " << u << " after loading";
    std::vector<std::vector<uint16_t>> before;
    for (const ParameterUnit& unit : store.units()) before.push_back(host_bf16(*ops, unit.compute));
    for (int64_t s = 0; s < 3; ++s) {
      trainer.step(rows_for(run.config, run.groups, options, s, layout.accumulation), options.lr);
      for (int u = 0; u < store.num_units(); ++u) {
        EXPECT_EQ(stale_elements(*ops, store.unit(u)), 0) << name << ": unit " << u << " after step " << s;
        // Not vacuous: the update moved the copy (a missed refresh would leave it as it was).
        EXPECT_NE(host_bf16(*ops, store.unit(u).compute), before[static_cast<size_t>(u)])
            << name << ": unit " << u << "'s copy did not change in step " << s;
        before[static_cast<size_t>(u)] = host_bf16(*ops, store.unit(u).compute);
      }
    }
    const MemoryAccount m = trainer.memory();
    EXPECT_EQ(m.parameter_bytes, plan_memory(run.config, ParallelDims{}.resolved(world), layout.sharding, layout.offload,
                                             DType::BF16)
                                     .parameter_bytes)
        << name;
    EXPECT_EQ(store.compute_bytes(), [&] {
      int64_t b = 0;
      for (const ParameterUnit& unit : store.units()) b += 2 * unit.padded_numel;
      return b;
    }()) << name;
  }
}

TEST(Bf16ComputeCopies, Zero3GathersHandTheirBf16BufferOverAndReleaseIt) {
  const int world = world_size();
  CurveOptions options;
  for (Offload offload : {Offload::None, Offload::Parameters}) {
    Layout layout{ShardingKind::Zero3};
    layout.offload = offload;
    const std::string name = layout.name(world);
    Bf16Run run(layout);
    ParameterStore& store = run.store();
    Ops* ops = run.ops.get();
    Trainer& trainer = run.trainer;
    for (int64_t s = 0; s < 2; ++s) trainer.step(rows_for(run.config, run.groups, options, s, 1), options.lr);
    const int units = store.num_units();
    for (int u = 0; u < units; ++u) EXPECT_EQ(stale_elements(*ops, store.unit(u)), -1) << name << ": unit " << u;
    // A forward walk of the hooks, as the decoder makes it: each unit gathered in compute precision,
    // then released before the next (whose buffer may be the same pool buffer).
    DataParallelStrategy& hooks = trainer.model().strategy();
    for (int u = 0; u < units; ++u) {
      hooks.before_forward(u);
      EXPECT_EQ(stale_elements(*ops, store.unit(u)), 0) << name << ": gathered unit " << u;
      // The fp32 view is the widened copy: bf16(master) exactly.
      const std::vector<float> wide = host_f32(*ops, store.unit(u).params);
      const std::vector<uint16_t> copy = host_bf16(*ops, store.unit(u).compute);
      int64_t differ = 0;
      for (size_t i = 0; i < wide.size(); ++i) differ += bf16_to_f32(copy[i]) != wide[i];
      EXPECT_EQ(differ, 0) << name << ": unit " << u;
      hooks.after_forward(u);
      if (u + 1 < units) EXPECT_EQ(stale_elements(*ops, store.unit(u)), -1) << name << ": released unit " << u;
    }
    for (int u = 0; u < units; ++u) EXPECT_FALSE(store.has_compute(u)) << name << ": unit " << u << " after the walk";
    // Saving's fp32 gathers round their copy from the fp32 masters.
    trainer.model().sharded_state().gather_unit_parameters(1);
    EXPECT_EQ(stale_elements(*ops, store.unit(1)), 0) << name << ": unit 1 gathered in full";
    trainer.model().sharded_state().release_unit_parameters(1);
    EXPECT_FALSE(store.has_compute(1)) << name;
  }
}

// Zeroes layer 0's fp32 masters without refreshing; returns the evaluation losses before, after the
// write, and after a refresh.
std::array<double, 3> losses_around_a_stale_write(DType compute) {
  HfModelDir dir = tiny_model();
  const ModelConfig config = dir.config();
  ProcessGroups self(Mesh(ParallelDims{}.resolved(1)), MPI_COMM_SELF);
  auto ops = make_cpu_ops(compute);
  Trainer trainer(config, *ops, self, testing::trainer_options(Layout{}));
  trainer.model().load_weights(weights_from_hf_dir(dir));
  std::vector<Batch> eval;
  for (int64_t row = 0; row < 4; ++row) eval.push_back(testing::synthetic_row(12, config.vocab_size, 3, 0, row));
  std::array<double, 3> losses{};
  losses[0] = trainer.evaluate(eval);
  ParameterStore& store = trainer.model().store();
  ops->fill_zero(store.unit(1).params);  // unit 1 = decoder layer 0
  losses[1] = trainer.evaluate(eval);
  store.refresh_compute(*ops);
  losses[2] = trainer.evaluate(eval);
  return losses;
}

TEST(Bf16ComputeCopies, TheDecoderComputesWithTheCopies) {
  const std::array<double, 3> bf16 = losses_around_a_stale_write(DType::BF16);
  EXPECT_EQ(std::memcmp(&bf16[0], &bf16[1], sizeof(double)), 0)
      << "a write to the masters without a refresh must not reach the bf16 forward: " << bf16[0] << " vs " << bf16[1];
  EXPECT_NE(bf16[2], bf16[0]) << "after the refresh the zeroed layer must change the loss";
  const std::array<double, 3> fp32 = losses_around_a_stale_write(DType::F32);
  EXPECT_NE(fp32[1], fp32[0]) << "control: under fp32 (no copies) the write changes the loss at once";
  EXPECT_EQ(std::memcmp(&fp32[1], &fp32[2], sizeof(double)), 0) << "control: refresh is a no-op under fp32";
}

}  // namespace
}  // namespace trlhpc
