// checkpoint_bench: how fast a checkpoint of a Qwen2.5-0.5B-shaped model is written and read back
// through parallel HDF5 (train/checkpoint), and how much memory each rank needs meanwhile.
//
//   OMP_NUM_THREADS=1 mpirun -np P checkpoint_bench [--layers 24] [--dir /tmp] [--iters 2] [--keep_cache] [--header]
//
// Model: hidden 896, intermediate 4864, 14 heads / 2 kv heads (head_dim 64), vocab 151936, tied
// embeddings, qkv bias (Qwen2.5-0.5B; 494M parameters at 24 layers), from the deterministic init
// (weights_from_init; no training step: the AdamW moments are zeros, which does not change the bytes
// written). Laid out as ZeRO-3 over all ranks, so parameters + gradients + AdamW moments (16 bytes per
// parameter, ~7.9 GB at 24 layers) are split over P.
//
// Timings, each the slowest rank's wall time, all ranks starting after a barrier; best of --iters:
//   write  checkpoint::save_checkpoint of the whole trainer state (params/, exp_avg/, exp_avg_sq/ in
//          one state.h5, fp32): collective MPI-IO writes, then rank 0 fsyncs state.h5, writes the
//          manifest and renames the folder into place (commit.cpp), so the time is to durable storage.
//   read   the resume: checkpoint::open_manifest + checkpoint::load_checkpoint into a second Trainer
//          of the same layout, built after the first one is destroyed (so memory holds one trainer),
//          checksums of every dataset verified. Before each read rank 0 evicts state.h5 from the page
//          cache (fsync + posix_fadvise DONTNEED on that file only), so the read comes from the disk;
//          --keep_cache skips that and measures a read from the page cache.
// CPU s: user + system CPU seconds of the busiest rank during that timed save or read (getrusage);
// close to the wall time means the ranks were busy computing or copying, far below it means waiting.
// GB/s = state.h5 bytes / time (1 GB = 1e9 B); per rank = total / P. Peak RSS: getrusage ru_maxrss,
// the largest over ranks (the whole run: init, saves, the second trainer, reads).
//
// The checkpoints go to a fresh folder made inside --dir (default /tmp), removed at the end; only the
// newest checkpoint is kept on disk between iterations (the previous one is deleted before a save,
// outside the timed region). save_checkpoint blocks every rank until the checkpoint is committed; what
// --async_save changes for the training loop is measured by async_save_bench.
#include <fcntl.h>
#include <mpi.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "qwen25_shape.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int64_t layers = 24;
  std::string dir = "/tmp";
  int iters = 2;
  bool keep_cache = false;
  bool header = false;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Qwen2.5-0.5B's shape (config.json of Qwen/Qwen2.5-0.5B) with `layers` decoder layers.

// The same string on every rank: rank 0's.
std::string broadcast_string(std::string text, MPI_Comm comm) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, comm);
  return text;
}

// User + system CPU seconds this process has used so far.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timing {
  double wall = 1e300, cpu = 0;  // the slowest rank's wall seconds; the busiest rank's CPU seconds
};

// `action` timed, all ranks starting after a barrier.
template <class F>
Timing timed(MPI_Comm comm, F&& action) {
  MPI_Barrier(comm);
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  action();
  double t[2] = {seconds_since(t0), cpu_seconds() - c0};
  MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, comm);
  return {t[0], t[1]};
}

Timing faster(Timing a, Timing b) { return b.wall < a.wall ? b : a; }

// Removes the benchmark's folder (rank 0) however run() ends; a run killed by mpirun leaves it.
struct RemoveOnExit {
  int rank;
  std::string dir;
  ~RemoveOnExit() {
    std::error_code ec;
    if (rank == 0 && !dir.empty()) fs::remove_all(dir, ec);
  }
};

// Drops `file`'s pages from the page cache (after writing back any dirty ones).
void evict_from_page_cache(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) throw RuntimeFailure("checkpoint_bench: cannot open " + file);
  ::fsync(fd);
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (rc != 0) throw RuntimeFailure("checkpoint_bench: posix_fadvise(DONTNEED) failed on " + file);
}

void print_header() {
  std::printf("| ranks | layers | params | state.h5 GB | write s | write CPU s | write GB/s total | write GB/s per rank | "
              "read s | read CPU s | read GB/s total | read GB/s per rank | read from | p+g+o GiB per rank | "
              "peak RSS GiB (max rank) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n");
}

int run(int argc, char** argv, MpiEnvironment& mpi) {
  namespace po = boost::program_options;
  BenchOptions o;
  po::options_description desc("checkpoint_bench options");
  desc.add_options()("layers", po::value(&o.layers)->default_value(o.layers), "decoder layers (24 = Qwen2.5-0.5B)")(
      "dir", po::value(&o.dir)->default_value(o.dir), "a fresh folder is made inside it for the checkpoints, removed at the end")(
      "iters", po::value(&o.iters)->default_value(o.iters), "saves and reads timed (the best is reported)")(
      "keep_cache", po::bool_switch(&o.keep_cache), "read from the page cache (do not evict state.h5 before reading)")(
      "header", po::bool_switch(&o.header), "print the table header before the row")("help", "this text");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  const int rank = mpi.world_rank(), P = mpi.world_size();
  if (vm.count("help")) {
    std::ostringstream text;
    text << desc;
    if (rank == 0) std::printf("usage: mpirun -np P checkpoint_bench [options]\n%s", text.str().c_str());
    return 0;
  }
  if (o.layers < 1 || o.iters < 1) throw UserError("checkpoint_bench: --layers and --iters must be at least 1");
  MPI_Comm comm = MPI_COMM_WORLD;
  if (o.header && rank == 0) print_header();

  const ModelConfig config = bench::qwen25_05b_config(o.layers, "checkpoint_bench config");
  const nlohmann::json identity = checkpoint::model_identity(config);
  std::string out;
  if (rank == 0) {
    std::string pattern = (fs::path(o.dir) / "checkpoint_bench.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw UserError("checkpoint_bench: cannot make a folder in " + o.dir);
    out = pattern;
  }
  out = broadcast_string(out, comm);
  RemoveOnExit remove_on_exit{rank, out};

  ProcessGroups groups(Mesh(ParallelDims{}.resolved(P)), comm);  // dp (fsdp) over every rank
  auto ops = make_ops(Topology::discover(mpi, DeviceRequest::Cpu));
  TrainerOptions options;
  options.parallel.data_parallel.sharding = ShardingKind::Zero3;

  Timing best_write, best_read;
  int64_t file_bytes = 0;
  MemoryAccount memory;
  std::string saved;
  {
    Trainer trainer(config, *ops, groups, options);
    trainer.model().load_weights(weights_from_init(config, 1, trainer.model().tp_layout()));
    memory = trainer.memory();
    for (int k = 1; k <= o.iters; ++k) {
      if (rank == 0 && !saved.empty()) fs::remove_all(saved);  // one checkpoint on disk at a time
      checkpoint::SaveRequest request;
      request.output_dir = out;
      request.progress.step = k;
      request.identity = identity;
      best_write = faster(best_write, timed(comm, [&] { saved = checkpoint::save_checkpoint(request, trainer); }));
    }
  }  // the saving trainer is gone before the resuming one is built
  const std::string state = (fs::path(saved) / checkpoint::kStateFile).string();
  if (rank == 0) file_bytes = static_cast<int64_t>(fs::file_size(state));
  MPI_Bcast(&file_bytes, 1, MPI_INT64_T, 0, comm);
  {
    Trainer resumed(config, *ops, groups, options);
    for (int k = 1; k <= o.iters; ++k) {
      if (rank == 0 && !o.keep_cache) evict_from_page_cache(state);
      int64_t step = -1;
      best_read = faster(best_read, timed(comm, [&] {
                             const nlohmann::json manifest = checkpoint::open_manifest(saved, identity);
                             step = checkpoint::load_checkpoint(saved, manifest, resumed).step;
                           }));
      if (step != o.iters) throw RuntimeFailure("checkpoint_bench: resumed at step " + std::to_string(step));
    }
  }
  MPI_Barrier(comm);

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double peak_gib = static_cast<double>(usage.ru_maxrss) * 1024.0 / (1 << 30);  // ru_maxrss: KiB on Linux
  MPI_Allreduce(MPI_IN_PLACE, &peak_gib, 1, MPI_DOUBLE, MPI_MAX, comm);
  if (rank == 0) {
    const double gb = static_cast<double>(file_bytes) / 1e9;
    const double pgo = static_cast<double>(memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes) / (1 << 30);
    const double w = best_write.wall, r = best_read.wall;
    std::printf("| %d | %lld | %.1fM | %.2f | %.2f | %.2f | %.3f | %.3f | %.2f | %.2f | %.3f | %.3f | %s | %.2f | %.2f |\n", P,
                static_cast<long long>(o.layers), static_cast<double>(config.parameter_count()) / 1e6, gb, w,
                best_write.cpu, gb / w, gb / w / P, r, best_read.cpu, gb / r, gb / r / P,
                o.keep_cache ? "page cache" : "disk", pgo, peak_gib);
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
    std::fprintf(stderr, "checkpoint_bench: %s\n", e.what());
    mpi.abort(2);
  }
}
