// dp_bench: weak scaling of the data-parallel profiles and how much of their communication the
// overlap hides.
//
//   OMP_NUM_THREADS=1 mpirun -np 2 dp_bench [--sharding none|zero1|zero2|zero3] [--steps 5] [--bucket_mb 25] [--rows 2]
//                                           [--seq 128] [--hidden 512] [--layers 6] [--vocab 8192]
//                                           [--comm_progress none|thread] [--poll_us 200]
//
// Every rank trains the same randomly initialised Qwen2-style model (defaults: ~20M parameters, tied
// embeddings) on its own synthetic rows (weak scaling: per-rank work is fixed). Timings, each the
// median over --steps steps after one warm-up step (a step's time is the slowest rank's), all ranks busy
// at the same time, self and distributed steps alternating:
//   T_self   DDP on a size-1 layout per rank (MPI_COMM_SELF): compute and optimizer only, no
//            data-parallel machinery, under the same CPU contention as the distributed run
//   T_dist   the profile over all ranks (its communicators progressed as --comm_progress says)
//   alone    the step's non-blocking collectives with nothing to overlap: issued async on buffers of the
//            unit sizes and waited at once, back to back, on the same communicators (DDP: all-reduce of
//            every unit's gradient; ZeRO-1/2: reduce-scatter + all-gather per unit; ZeRO-3: two
//            all-gathers (forward, backward) + a reduce-scatter per unit)
//   wait     time the rank spent blocked in CommRequest::wait() of the step's non-blocking operations
//            after every peer had issued the operation (every group's MpiCommunicator::async_wait():
//            seconds - before_peers), the slowest rank's
//   skew     the rest of that blocked time: waiting for a peer that had not issued the operation yet
//            (load imbalance, e.g. a rank descheduled by other work on a shared machine; no progress
//            mechanism can hide it). Known from the hang watchdog's arrival notices (on by default).
// hidden = 1 - wait / alone (clipped to 0..100%): the share of the communication time that compute
// covered. tokens/s per rank: median and best step of the distributed run (the machine may be shared; the
// best step is the least disturbed one). exposed = median(T_dist - T_self) is what the profile adds to
// the step: communication it waited for, plus ZeRO's extra copies (gathers into and reductions out of
// full unit buffers) and the progress thread's CPU time.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "trlhpc/ops/backend.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/comm/progress_thread.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string sharding = "none";
  int steps = 5;
  int64_t bucket_mb = 25;
  int64_t rows = 2, seq = 128, hidden = 512, layers = 6, vocab = 8192;
  std::string comm_progress = "none";
  int poll_us = static_cast<int>(kDefaultProgressPollInterval.count());
  bool print_timeline = false;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Qwen2-style: hidden C, intermediate 2.75 C, C/64 heads, 2 kv heads, tied embeddings.
ModelConfig bench_config(const BenchOptions& o) {
  nlohmann::json j = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"},
                      {"hidden_size", o.hidden}, {"intermediate_size", o.hidden * 11 / 4},
                      {"num_hidden_layers", o.layers}, {"num_attention_heads", o.hidden / 64},
                      {"num_key_value_heads", 2}, {"vocab_size", o.vocab}, {"max_position_embeddings", 4096},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"tie_word_embeddings", true},
                      {"initializer_range", 0.02}};
  return ModelConfig::from_json(j, "dp_bench config");
}

// Synthetic pre-tokenized rows: one document per row, every token trained on.
Batch synthetic_batch(const BenchOptions& o, int64_t vocab, uint64_t seed) {
  Batch b;
  b.rows = o.rows;
  b.seq_len = o.seq;
  uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int64_t r = 0; r < o.rows; ++r)
    for (int64_t t = 0; t < o.seq; ++t) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      b.input_ids.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
      b.positions.push_back(static_cast<int32_t>(t));
      b.doc_ids.push_back(0);
    }
  for (int64_t r = 0; r < o.rows; ++r)
    for (int64_t t = 0; t < o.seq; ++t)
      b.targets.push_back(t + 1 < o.seq ? b.input_ids[static_cast<size_t>(r * o.seq + t + 1)] : kIgnoreIndex);
  return b;
}

// This rank's blocked time in waits of non-blocking operations so far, over every group: {seconds,
// seconds before every peer had issued the operation} (MpiCommunicator::async_wait()).
struct Waited {
  double seconds = 0, before_peers = 0;
};
Waited async_waited(ProcessGroups& groups) {
  Waited total;
  for (GroupKind kind : kAllGroupKinds) {
    const AsyncWaitStats& w = dynamic_cast<MpiCommunicator&>(groups.get(kind).device()).async_wait();
    total.seconds += w.seconds;
    total.before_peers += w.before_peers;
  }
  return total;
}

double slowest_rank(double seconds, ProcessGroups& world) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, world.world().mpi_comm());
  return seconds;
}

double mean_over_ranks(double x, ProcessGroups& world) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, world.world().mpi_comm());
  return x / world.world().size();
}

struct RunResult {
  double self_seconds = 0, dist_seconds = 0, best_dist_seconds = 0, exposed_seconds = 0;
  double wait_seconds = 0, skew_seconds = 0;  // medians over steps of the slowest rank's
  double thread_cpu_seconds = 0;              // progress thread's CPU time per step, mean over ranks and steps
  MemoryAccount memory;
};

// Self and distributed steps alternate, so both sample the same background load (this machine is
// shared); exposed is the median of the paired differences, which cancels slow drifts in that load.
RunResult run_training(const BenchOptions& o, const ModelConfig& config, const Topology& topology, ProcessGroups& self,
                       ProcessGroups& world) {
  TrainerOptions options;
  options.parallel.data_parallel.sharding = parse_sharding(o.sharding);
  options.parallel.data_parallel.bucket_elements = o.bucket_mb * 1024 * 1024 / 4;
  TrainerOptions compute_only = options;
  compute_only.parallel.data_parallel.sharding = ShardingKind::None;
  auto ops = make_ops(topology);
  Trainer alone(config, *ops, self, compute_only), dist(config, *ops, world, options);
  alone.model().load_weights(weights_from_init(config, 1));
  dist.model().load_weights(weights_from_init(config, 1));
  auto timed_step = [&](Trainer& trainer, int s) {
    const Batch batch = synthetic_batch(o, config.vocab_size, static_cast<uint64_t>(s * 131 + world.world_rank()));
    MPI_Barrier(world.world().mpi_comm());
    const auto t0 = Clock::now();
    trainer.step({batch}, 1e-4);
    return slowest_rank(seconds_since(t0), world);
  };
  std::vector<double> self_steps, dist_steps, exposed, waits, skews;
  MpiProgressThread* progress = world.world().host().progress_thread();
  double thread_cpu = 0;
  for (int s = 0; s <= o.steps; ++s) {
    const double a = timed_step(alone, s);
    const Waited before = async_waited(world);
    const double cpu_before = progress ? progress->cpu_seconds() : 0;
    const double d = timed_step(dist, s);
    const Waited after = async_waited(world);
    if (s > 0 && progress) thread_cpu += progress->cpu_seconds() - cpu_before;
    // The slowest rank's transfer wait, and its wait for peers that had not issued the operation yet.
    const double waited = slowest_rank((after.seconds - after.before_peers) - (before.seconds - before.before_peers), world);
    const double skew = slowest_rank(after.before_peers - before.before_peers, world);
    if (o.print_timeline && world.world_rank() == 0) {
      const CommTimeline& t = dist.model().strategy().timeline();
      std::fprintf(stderr, "step %d wait %.1f ms (+ %.1f ms before peers):", s, waited * 1e3, skew * 1e3);
      for (size_t b = 0; b < t.bucket_done.size(); ++b)
        std::fprintf(stderr, " [%.1f..%.1f]", (t.bucket_launch[b] - t.backward_end) * 1e3, (t.bucket_done[b] - t.backward_end) * 1e3);
      std::fprintf(stderr, "\n");
    }
    if (s == 0) continue;  // warm-up: first-touch page faults, pool allocation
    self_steps.push_back(a);
    dist_steps.push_back(d);
    exposed.push_back(d - a);
    waits.push_back(waited);
    skews.push_back(skew);
  }
  return {median(self_steps), median(dist_steps), *std::min_element(dist_steps.begin(), dist_steps.end()),
          median(exposed), median(waits), median(skews), mean_over_ranks(thread_cpu / o.steps, world), dist.memory()};
}

// The step's non-blocking collectives with nothing to overlap (see the header comment).
double communication_alone_seconds(const BenchOptions& o, const ModelConfig& config, const Topology& topology,
                                   ProcessGroups& groups) {
  auto ops = make_ops(topology);
  ParameterStore store(config, *ops, groups.fsdp().size());
  const ShardingKind kind = parse_sharding(o.sharding);
  Communicator& fsdp = groups.fsdp().device();
  std::vector<double> rounds;
  for (int round = 0; round < 3; ++round) {
    MPI_Barrier(groups.world().mpi_comm());
    const auto t0 = Clock::now();
    for (ParameterUnit& unit : store.units()) {
      std::span<float> full(unit.grads.f32(), static_cast<size_t>(unit.padded_numel));
      std::vector<float> shard(static_cast<size_t>(unit.padded_numel / fsdp.size()));
      if (kind == ShardingKind::None) {
        groups.loss().device().all_reduce_async(full).wait();
        continue;
      }
      const int gathers = kind == ShardingKind::Zero3 ? 2 : 1;
      for (int g = 0; g < gathers; ++g)
        fsdp.all_gather_async(std::span<const float>(shard), std::span<float>(unit.params.f32(), full.size())).wait();
      fsdp.reduce_scatter_async(std::span<const float>(full), std::span<float>(shard)).wait();
      groups.dp_replicate().device().all_reduce_async(std::span<float>(shard)).wait();
    }
    rounds.push_back(slowest_rank(seconds_since(t0), groups));
  }
  return median(rounds);
}

int run(int argc, char** argv, MpiEnvironment& mpi) {
  namespace po = boost::program_options;
  BenchOptions o;
  po::options_description desc("dp_bench options");
  desc.add_options()("sharding", po::value(&o.sharding)->default_value(o.sharding), "none|zero1|zero2|zero3")(
      "steps", po::value(&o.steps)->default_value(o.steps), "timed steps (after one warm-up)")(
      "bucket_mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb), "DDP gradient bucket size (MiB)")(
      "rows", po::value(&o.rows)->default_value(o.rows), "rows per rank per step")(
      "seq", po::value(&o.seq)->default_value(o.seq), "tokens per row")(
      "hidden", po::value(&o.hidden)->default_value(o.hidden), "hidden size")(
      "layers", po::value(&o.layers)->default_value(o.layers), "decoder layers")(
      "vocab", po::value(&o.vocab)->default_value(o.vocab), "vocabulary size")(
      "comm_progress", po::value(&o.comm_progress)->default_value(o.comm_progress),
      "none|thread: who progresses the distributed run's communication between its test() calls")(
      "poll_us", po::value(&o.poll_us)->default_value(o.poll_us), "progress thread: microseconds between polls")(
      "print_timeline", po::bool_switch(&o.print_timeline),
      "stderr, per step: blocked wait and each reduction's launch..seen-done in ms relative to the backward's end")(
      "help", "this text");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::ostringstream text;
    text << desc;
    if (mpi.world_rank() == 0) std::printf("usage: mpirun -np N dp_bench [options]\n%s", text.str().c_str());
    return 0;
  }
  const ModelConfig config = bench_config(o);
  MpiCommunicatorOptions comm_options;
  comm_options.progress = make_progress_thread(parse_comm_progress(o.comm_progress), nullptr,
                                               std::chrono::microseconds(o.poll_us));
  ProcessGroups world(Mesh(ParallelDims{}.resolved(mpi.world_size())), MPI_COMM_WORLD, comm_options);
  ProcessGroups self(Mesh(ParallelDims{}.resolved(1)), MPI_COMM_SELF);

  const Topology topology = Topology::discover(mpi, DeviceRequest::Cpu);
  const RunResult r = run_training(o, config, topology, self, world);
  const double alone = communication_alone_seconds(o, config, topology, world);
  if (mpi.world_rank() == 0) {
    const double tokens = static_cast<double>(o.rows * o.seq);
    char hidden[32] = "-";
    if (mpi.world_size() > 1 && alone > 0)
      std::snprintf(hidden, sizeof hidden, "%.0f%%", 100.0 * std::clamp(1.0 - r.wait_seconds / alone, 0.0, 1.0));
    std::string progress = o.comm_progress;
    if (comm_options.progress)
      progress += " " + std::to_string(o.poll_us) + " us (" + std::to_string(static_cast<int>(r.thread_cpu_seconds * 1e3 + 0.5)) +
                  " ms CPU)";
    const MemoryAccount& m = r.memory;
    std::printf("| %s | %s | %d | %.1fM | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %s | %.0f | %.1f |\n",
                o.sharding.c_str(), progress.c_str(), mpi.world_size(),
                static_cast<double>(config.parameter_count()) / 1e6, tokens / r.dist_seconds,
                tokens / r.best_dist_seconds, r.self_seconds * 1e3, r.dist_seconds * 1e3, alone * 1e3,
                r.wait_seconds * 1e3, r.skew_seconds * 1e3, hidden, r.exposed_seconds * 1e3,
                static_cast<double>(m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes) / (1 << 20));
  }
  return 0;
}

}  // namespace
}  // namespace trlhpc

int main(int argc, char** argv) {
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  try {
    return trlhpc::run(argc, argv, mpi);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dp_bench: %s\n", e.what());
    mpi.abort(2);
  }
}
