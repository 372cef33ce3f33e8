// async_save_bench: what a checkpoint costs the training loop, saved synchronously
// (checkpoint::save_checkpoint) and in the background (checkpoint::AsyncCheckpointSaver, --async_save).
//
//   OMP_NUM_THREADS=1 mpirun -np P async_save_bench [--layers 24] [--seq 64] [--steps_after 3] [--dir /tmp] [--header]
//
// Model: the Qwen2.5-0.5B shape of checkpoint_bench (hidden 896, 14/2 heads, intermediate 4864, vocab
// 151936, tied; 494M parameters at 24 layers) under ZeRO-3 over every rank, trained on one synthetic
// row of --seq tokens per rank per step. For each mode, after one warm-up step:
//   step s       median wall time of 3 steps without a save (the slowest rank's)
//   blocked s    how long the save holds the training loop: the whole write and commit when
//                synchronous; the host copy of the rank's state when asynchronous
//   save+K s     wall time from the save to the end of the K = --steps_after steps that follow it,
//                the background write waited for at the end (so the checkpoint is committed)
//   overhead s   save+K - K x step: the training time the checkpoint cost
//   write s      (async) the background write's own duration, host copy to commit
// Every time is the slowest rank's. The checkpoints go to a fresh folder inside --dir, removed at the
// end. The two modes write the same bytes (tests/mpi/test_checkpoint: AsyncSaveHoldsTheStateOfItsStep).
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qwen25_shape.hpp"
#include "random_row.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/checkpoint/async_save.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int64_t layers = 24, seq = 64;
  int steps_after = 3;
  std::string dir = "/tmp";
  bool header = false;
};


double slowest(double seconds, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct ModeResult {
  double step = 0, blocked = 0, save_and_steps = 0, write = 0;
};

ModeResult measure(bool async, const BenchOptions& o, const ModelConfig& config, ProcessGroups& groups, Ops& ops,
                   const std::string& out) {
  MPI_Comm comm = MPI_COMM_WORLD;
  TrainerOptions options;
  options.parallel.data_parallel.sharding = ShardingKind::Zero3;
  Trainer trainer(config, ops, groups, options);
  trainer.model().load_weights(weights_from_init(config, 1, trainer.model().tp_layout()));
  std::optional<checkpoint::AsyncCheckpointSaver> saver;
  if (async) saver.emplace(groups, kDefaultCollectiveTimeoutSeconds);
  uint64_t seed = 1000 * static_cast<uint64_t>(groups.world_rank());
  const auto step = [&] {
    const std::vector<Batch> micro = {trainer.model().shard_tokens(bench::random_row(o.seq, config.vocab_size, ++seed))};
    trainer.step(micro, 1e-5);
  };
  step();  // warm-up
  ModeResult r;
  std::vector<double> alone;
  for (int i = 0; i < 3; ++i) {
    MPI_Barrier(comm);
    const auto t0 = Clock::now();
    step();
    alone.push_back(slowest(since(t0), comm));
  }
  std::sort(alone.begin(), alone.end());
  r.step = alone[1];
  checkpoint::SaveRequest request;
  request.output_dir = (fs::path(out) / (async ? "async" : "sync")).string();
  request.progress.step = 4;
  request.identity = checkpoint::model_identity(config);
  MPI_Barrier(comm);
  const auto t0 = Clock::now();
  if (saver) saver->start(request, trainer);
  else checkpoint::save_checkpoint(request, trainer);
  r.blocked = slowest(since(t0), comm);
  for (int i = 0; i < o.steps_after; ++i) step();
  if (saver) saver->wait();
  r.save_and_steps = slowest(since(t0), comm);
  if (saver) r.write = slowest(saver->last_write_seconds(), comm);
  return r;
}

int run(int argc, char** argv, MpiEnvironment& mpi) {
  namespace po = boost::program_options;
  BenchOptions o;
  po::options_description desc("async_save_bench options");
  desc.add_options()("layers", po::value(&o.layers)->default_value(o.layers), "decoder layers (24 = Qwen2.5-0.5B)")(
      "seq", po::value(&o.seq)->default_value(o.seq), "tokens per rank per step")(
      "steps_after", po::value(&o.steps_after)->default_value(o.steps_after), "training steps timed after the save")(
      "dir", po::value(&o.dir)->default_value(o.dir), "a fresh folder is made inside it, removed at the end")(
      "header", po::bool_switch(&o.header), "print the table header before the row")("help", "this text");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  const int rank = mpi.world_rank(), P = mpi.world_size();
  if (vm.count("help")) {
    std::ostringstream text;
    text << desc;
    if (rank == 0) std::printf("usage: mpirun -np P async_save_bench [options]\n%s", text.str().c_str());
    return 0;
  }
  if (o.layers < 1 || o.seq < 2 || o.steps_after < 1)
    throw UserError("async_save_bench: --layers >= 1, --seq >= 2 and --steps_after >= 1");
  if (o.header && rank == 0) {
    std::printf("| ranks | layers | params | step s | sync: blocked s | sync: save+K s | sync: overhead s | "
                "async: blocked s | async: write s | async: save+K s | async: overhead s | K |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  const ModelConfig config = bench::qwen25_05b_config(o.layers, "async_save_bench config");
  std::string out;
  if (rank == 0) {
    std::string pattern = (fs::path(o.dir) / "async_save_bench.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw UserError("async_save_bench: cannot make a folder in " + o.dir);
    out = pattern;
  }
  int length = static_cast<int>(out.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  out.resize(static_cast<size_t>(length));
  MPI_Bcast(out.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);

  ProcessGroups groups(Mesh(ParallelDims{}.resolved(P)), MPI_COMM_WORLD);
  auto ops = make_ops(Topology::discover(mpi, DeviceRequest::Cpu));
  const ModeResult s = measure(false, o, config, groups, *ops, out);
  if (rank == 0) fs::remove_all(fs::path(out) / "sync");  // one checkpoint on disk at a time
  const ModeResult a = measure(true, o, config, groups, *ops, out);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    fs::remove_all(out);
    const double K = o.steps_after;
    std::printf("| %d | %lld | %.1fM | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", P,
                static_cast<long long>(o.layers), static_cast<double>(config.parameter_count()) / 1e6, s.step, s.blocked,
                s.save_and_steps, s.save_and_steps - K * s.step, a.blocked, a.write, a.save_and_steps,
                a.save_and_steps - K * a.step, o.steps_after);
    std::fflush(stdout);
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
    std::fprintf(stderr, "async_save_bench: %s\n", e.what());
    return 1;
  }
}
