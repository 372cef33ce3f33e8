// The communication progress thread (`--comm_progress thread`, progress_thread.hpp) under mpirun.
//
// 1. Progress is real: rendezvous-size operations (4 MiB, far above Open MPI's 4 KiB shared-memory
//    eager limit, so a transfer needs MPI calls on both sides after the launch) complete while the
//    owner makes no MPI call at all: it sleeps until the thread reports every operation complete
//    (no timing bound beyond "completes"; a generous deadline turns a hang into a failure), then
//    checks every output exactly. With and without the hang watchdog (its waits test in a loop).
// 2. Numbers are unchanged: DDP, ZeRO-2 and ZeRO-3 over the whole world (data parallel) and ring
//    attention over cp = world train 6 AdamW steps of qwen2_tiny with the thread and without it. Loss,
//    grad norm and final parameters must be bitwise equal (the thread only changes when MPI's algorithm
//    advances, never the algorithm or the reduction order), and the curve must match the
//    single-process one within 1e-5 relative, as the layout-equivalence tests require.
// Skips (visibly) when the MPI library runs below MPI_THREAD_MULTIPLE: then no thread exists.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "mpi/comm_test_support.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/comm/progress_thread.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {
namespace {

std::shared_ptr<MpiProgressThread> progress_thread_or_null() {
  return make_progress_thread(CommProgress::Thread);
}

// Sleeps, without any MPI call, until `thread` has completed `count` operations or `limit` passed.
bool thread_completes(const MpiProgressThread& thread, uint64_t count, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (thread.completed_by_thread() < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(CommProgress, RendezvousOperationsCompleteWhileTheOwnerSleeps) {
  const auto thread = progress_thread_or_null();
  if (!thread) GTEST_SKIP() << "MPI runs below MPI_THREAD_MULTIPLE: no progress thread to test";
  for (const double timeout : {0.0, 600.0}) {
    SCOPED_TRACE(timeout > 0 ? "watchdog on" : "watchdog off");
    MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
    MpiCommunicatorOptions options;
    options.timeout_seconds = timeout;
    options.progress = thread;
    MpiCommunicator comm(handle.get(), options);
    const int P = comm.size(), r = comm.rank();
    const size_t n = 1 << 20;  // 4 MiB of floats per buffer
    using testing::v;
    const auto in = testing::filled<float>(n, [&](size_t i) { return v(r, i); });
    const std::vector<float> shard(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n / P));
    std::vector<float> reduced(n), scattered(n / P), gathered((n / P) * P), ring(n);
    const int next = (r + 1) % P, prev = (r + P - 1) % P;

    const uint64_t before = thread->completed_by_thread();
    std::vector<CommRequest> requests;
    requests.push_back(comm.all_reduce_async(in, std::span(reduced)));                      // DDP bucket
    requests.push_back(comm.reduce_scatter_async(in, std::span(scattered)));         // ZeRO gradients
    requests.push_back(comm.all_gather_async(shard, std::span(gathered)));                  // ZeRO-3 params
    requests.push_back(comm.send_recv_async(in, next, std::span(ring), prev));              // ring hop
    EXPECT_TRUE(thread_completes(*thread, before + requests.size(), std::chrono::seconds(120)))
        << "the progress thread completed " << thread->completed_by_thread() - before << " of " << requests.size()
        << " operations in 120 s while this rank made no MPI call";
    for (CommRequest& request : requests) request.wait();  // already complete: returns at once

    const size_t m = n / P;
    EXPECT_TRUE(testing::matches(reduced, [&](size_t i) {
      int64_t s = 0;
      for (int q = 0; q < P; ++q) s += v(q, i);
      return s;
    }));
    EXPECT_TRUE(testing::matches(scattered, [&](size_t i) {
      int64_t s = 0;
      for (int q = 0; q < P; ++q) s += v(q, r * m + i);
      return s;
    }));
    EXPECT_TRUE(testing::matches(gathered, [&](size_t i) { return v(static_cast<int>(i / m), i % m); }));
    EXPECT_TRUE(testing::matches(ring, [&](size_t i) { return v(prev, i); }));
    comm.barrier();
  }
}

TEST(CommProgress, WaitStatsCountOnlyAsyncWaits) {
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(handle.get(), MpiCommunicatorOptions{});
  std::vector<float> data(1000, 1.0f);
  comm.all_reduce(std::span(data));  // blocking: not an async wait
  EXPECT_EQ(comm.async_wait().waits, 0u);
  comm.all_reduce_async(std::span(data)).wait();
  CommRequest dropped = comm.all_reduce_async(std::span(data));
  dropped = CommRequest();  // the destructor's wait counts too
  EXPECT_EQ(comm.async_wait().waits, 2u);
  EXPECT_GE(comm.async_wait().seconds, 0.0);
}

struct ProgressLayout {
  std::string name;
  ShardingKind sharding = ShardingKind::None;
  int cp = 1;  // cp = world: ring attention; otherwise data parallel over the world
};

// 6 steps of the 16-row global batch on `groups` (dp and/or cp over the world), each micro-batch sharded
// over cp as sft_job does.
testing::Curve train(const ModelConfig& config, const UnitRangeSource& weights, ProcessGroups& groups,
                     ShardingKind sharding) {
  testing::Layout layout;
  layout.sharding = sharding;
  auto ops = make_cpu_ops();
  Trainer trainer(config, *ops, groups, testing::trainer_options(layout));
  trainer.model().load_weights(weights);
  const testing::CurveOptions options;
  const int64_t D = groups.dp().size(), d = groups.dp().rank(), R = options.global_rows / D;
  testing::Curve curve;
  for (int64_t s = 0; s < 6; ++s) {
    std::vector<Batch> rows;
    for (int64_t i = 0; i < R; ++i)
      rows.push_back(testing::synthetic_row(options.seq_len, config.vocab_size, options.data_seed, s, d * R + i));
    curve.steps.push_back(trainer.step({trainer.model().shard_tokens(testing::concat_rows(rows))}, options.lr));
  }
  trainer.model().sharded_state().gather_full_parameters();
  for (ParameterUnit& unit : trainer.model().store().units()) {
    std::vector<float> host(static_cast<size_t>(unit.numel));
    ops->copy_to_host(host.data(), unit.params, host.size() * sizeof(float));
    curve.final_params.push_back(std::move(host));
  }
  trainer.model().sharded_state().release_full_parameters();
  return curve;
}

TEST(CommProgress, TrainingIsBitIdenticalWithTheThreadAndMatchesOneProcess) {
  const auto thread = progress_thread_or_null();
  if (!thread) GTEST_SKIP() << "MPI runs below MPI_THREAD_MULTIPLE: no progress thread to test";
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  HfModelDir dir(testing::tests_dir() + "/golden/qwen2_tiny/model");
  const UnitRangeSource weights = weights_from_hf_dir(dir);
  // Reference: one process, 6 steps of the same batches.
  ProcessGroups self(Mesh(ParallelDims{}.resolved(1)), MPI_COMM_SELF);
  const testing::Curve reference = train(dir.config(), weights, self, ShardingKind::None);

  std::vector<ProgressLayout> layouts = {{"DDP", ShardingKind::None, 1},
                                         {"ZeRO-2", ShardingKind::Zero2, 1},
                                         {"ZeRO-3", ShardingKind::Zero3, 1}};
  // Rows are padded to 2*cp zigzag chunks, so any world size can be the cp size.
  layouts.push_back({"ring attention cp " + std::to_string(world), ShardingKind::None, world});
  double worst = 0;
  for (const ProgressLayout& layout : layouts) {
    SCOPED_TRACE(layout.name);
    const ParallelDims dims = ParallelDims{1, -1, layout.cp, 1, 1}.resolved(world);
    testing::Curve curves[2];
    for (int with_thread = 0; with_thread < 2; ++with_thread) {
      MpiCommunicatorOptions options;
      if (with_thread) options.progress = thread;
      ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD, options);
      curves[with_thread] = train(dir.config(), weights, groups, layout.sharding);
    }
    const testing::Curve& none = curves[0];
    const testing::Curve& threaded = curves[1];
    ASSERT_EQ(threaded.steps.size(), reference.steps.size());
    for (size_t s = 0; s < reference.steps.size(); ++s) {
      EXPECT_EQ(std::memcmp(&threaded.steps[s].loss, &none.steps[s].loss, sizeof(double)), 0)
          << "step " << s << ": loss " << threaded.steps[s].loss << " with the thread, " << none.steps[s].loss
          << " without";
      EXPECT_EQ(std::memcmp(&threaded.steps[s].grad_norm, &none.steps[s].grad_norm, sizeof(double)), 0)
          << "step " << s << ": grad norm " << threaded.steps[s].grad_norm << " with the thread, "
          << none.steps[s].grad_norm << " without";
      const double dl = testing::relative_difference(threaded.steps[s].loss, reference.steps[s].loss);
      const double dn = testing::relative_difference(threaded.steps[s].grad_norm, reference.steps[s].grad_norm);
      worst = std::max({worst, dl, dn});
      EXPECT_LE(dl, 1e-5) << "step " << s << ": loss " << threaded.steps[s].loss << " vs one process "
                          << reference.steps[s].loss;
      EXPECT_LE(dn, 1e-5) << "step " << s << ": grad norm " << threaded.steps[s].grad_norm << " vs one process "
                          << reference.steps[s].grad_norm;
    }
    ASSERT_EQ(threaded.final_params.size(), none.final_params.size());
    for (size_t u = 0; u < none.final_params.size(); ++u) {
      const std::vector<float>& a = threaded.final_params[u];
      const std::vector<float>& b = none.final_params[u];
      ASSERT_EQ(a.size(), b.size());
      size_t differing = 0, first = 0;
      for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differing++ == 0) first = i;
      EXPECT_EQ(differing, 0u) << "unit " << u << ": " << differing << " parameters differ with the thread; first at "
                               << first << ": " << a[first] << " vs " << b[first];
    }
  }
  if (rank == 0)
    std::printf("[ measured ] %d ranks: with the progress thread bitwise equal to without for DDP, ZeRO-2, ZeRO-3 and "
                "ring attention; worst relative deviation from one process %.2e; thread completed %llu operations\n",
                world, worst, static_cast<unsigned long long>(thread->completed_by_thread()));
}

}  // namespace
}  // namespace trlhpc
