// zero3_memory_bench: where the resident memory of a ZeRO-3 rank goes, phase by phase, on the path
// `trlhpc sft` takes (Trainer = parallelize + AdamW, weights from a Hugging Face directory, steps with
// gradient checkpointing, the final Hugging Face export).
//
//   OMP_NUM_THREADS=1 mpirun -np 2 zero3_memory_bench [--layers 24] [--seq 512] [--steps 3]
//                                                      [--model_dir DIR] [--dir /tmp]
//
// Model: the Qwen2.5-0.5B shape (bench/qwen25_shape.hpp; 494M parameters at 24 layers, tied), ZeRO-3
// over every rank, --gradient_checkpointing, one row of --seq random tokens per rank per step. Rank 0
// first writes a random-init F32 model directory (the deterministic init) at --model_dir when it does not
// exist (kept for later runs; without --model_dir a temporary one under --dir, removed at the end), and
// every rank loads it, as `trlhpc sft --model_name_or_path` does.
//
// Phases: set-up (Trainer), load, first forward (an evaluation of the row: forward only), step 1
// (forward + backward + AdamW), steps 2..N, final save (export_hf_model). Before each phase every rank
// resets its peak RSS (writing 5 to /proc/self/clear_refs); after it, VmHWM is the phase's peak and VmRSS
// what it left resident. Printed: the largest rank's values (GiB), and the strategy's accounting: the
// sharded state (parameters + gradients + AdamW moments), the transient unit buffers, the decoder's
// activations and the planned floor (MemoryAccount). The overall peak is the largest phase peak.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qwen25_shape.hpp"
#include "random_row.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/init.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/model_export.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  int64_t layers = 24, seq = 512;
  int steps = 3;
  std::string model_dir, dir = "/tmp";
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A field of /proc/self/status in bytes (the kernel reports kB).
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so the next reading is the peak of what follows.
void reset_peak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

int64_t largest(int64_t value) {
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return value;
}

// Runs one phase between a peak reset and the readings; prints the largest rank's figures.
class PhaseTable {
 public:
  explicit PhaseTable(bool print) : print_(print) {
    if (print_) {
      std::printf("| phase | s | peak RSS GiB (max rank) | RSS after GiB (max rank) |\n|---|---:|---:|---:|\n");
      std::fflush(stdout);
    }
  }
  template <class F>
  void run(const std::string& name, F&& phase) {
    MPI_Barrier(MPI_COMM_WORLD);
    reset_peak();
    const auto t0 = Clock::now();
    phase();
    MPI_Barrier(MPI_COMM_WORLD);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const int64_t peak = largest(status_bytes("VmHWM")), after = largest(status_bytes("VmRSS"));
    overall_ = std::max(overall_, peak);
    if (print_) {
      std::printf("| %s | %.1f | %.2f | %.2f |\n", name.c_str(), seconds, peak / kGiB, after / kGiB);
      std::fflush(stdout);
    }
  }
  int64_t overall_peak() const { return overall_; }

 private:
  bool print_;
  int64_t overall_ = 0;
};

// Rank 0 writes a random-init F32 model directory of `config` at `dir`.
void write_random_model(const ModelConfig& config, const std::string& dir) {
  save_hf_model_dir(dir, config, [&](const ParameterSpec& spec, float* out) { init_parameter(config, spec, 7, out); });
}

std::string shared_temp_dir(const std::string& parent, int rank) {
  std::string path;
  if (rank == 0) {
    std::string pattern = (fs::path(parent) / "zero3_memory_bench.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw UserError("zero3_memory_bench: cannot make a folder in " + parent);
    path = pattern;
  }
  int length = static_cast<int>(path.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  path.resize(static_cast<size_t>(length));
  MPI_Bcast(path.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

int run(int argc, char** argv, MpiEnvironment& mpi) {
  namespace po = boost::program_options;
  BenchOptions o;
  po::options_description desc("zero3_memory_bench options");
  desc.add_options()("layers", po::value(&o.layers)->default_value(o.layers), "decoder layers (24 = Qwen2.5-0.5B)")(
      "seq", po::value(&o.seq)->default_value(o.seq), "tokens per row (one row per rank per step)")(
      "steps", po::value(&o.steps)->default_value(o.steps), "optimizer steps")(
      "model_dir", po::value(&o.model_dir), "model directory of this shape; written there when absent (default: a temporary one)")(
      "dir", po::value(&o.dir)->default_value(o.dir), "where the temporary model and output go")("help", "this text");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  const int rank = mpi.world_rank(), P = mpi.world_size();
  if (vm.count("help")) {
    if (rank == 0) std::printf("%s", (std::ostringstream() << desc).str().c_str());
    return 0;
  }
  if (o.layers < 1 || o.seq < 2 || o.steps < 1) throw UserError("zero3_memory_bench: --layers, --seq - 1 and --steps >= 1");

  const ModelConfig config = bench::qwen25_05b_config(o.layers, "zero3_memory_bench config");
  const std::string work = shared_temp_dir(o.dir, rank);
  // A --model_dir that does not exist yet is written there and kept for the next run.
  const std::string model_dir = o.model_dir.empty() ? (fs::path(work) / "model").string() : o.model_dir;
  if (rank == 0 && !fs::exists(model_dir)) write_random_model(config, model_dir);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("zero3_memory_bench: %d ranks, %lld layers, %.1fM parameters, %lld tokens per rank per step, %d steps\n",
                P, static_cast<long long>(o.layers), static_cast<double>(config.parameter_count()) / 1e6,
                static_cast<long long>(o.seq), o.steps);

  ProcessGroups groups(Mesh(ParallelDims{}.resolved(P)), MPI_COMM_WORLD);
  auto ops = make_ops(Topology::discover(mpi, DeviceRequest::Cpu));
  TrainerOptions options;
  options.parallel.data_parallel.sharding = ShardingKind::Zero3;
  options.parallel.gradient_checkpointing = true;
  std::unique_ptr<Trainer> trainer;
  PhaseTable table(rank == 0);
  uint64_t seed = 1000 * static_cast<uint64_t>(rank);
  const auto rows = [&] {
    return std::vector<Batch>{trainer->model().shard_tokens(bench::random_row(o.seq, config.vocab_size, ++seed))};
  };
  table.run("set-up (parallelize + AdamW)", [&] { trainer = std::make_unique<Trainer>(config, *ops, groups, options); });
  table.run("load (" + std::string(o.model_dir.empty() ? "random-init F32 directory" : "--model_dir") + ")", [&] {
    const HfModelDir dir(model_dir);
    trainer->model().load_weights(weights_from_hf_dir(dir, trainer->model().tp_layout()));
  });
  table.run("first forward (evaluation)", [&] { trainer->evaluate(rows()); });
  table.run("step 1 (forward + backward + AdamW)", [&] { trainer->step(rows(), 1e-5); });
  if (o.steps > 1)
    table.run("steps 2.." + std::to_string(o.steps), [&] {
      for (int s = 1; s < o.steps; ++s) trainer->step(rows(), 1e-5);
    });
  table.run("final save (export_hf_model)", [&] {
    export_hf_model(trainer->model(), (fs::path(work) / "out").string(), "", rank == 0);
  });

  const MemoryAccount m = trainer->memory();
  const int64_t state = largest(m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes);
  const int64_t transient = largest(m.transient_bytes);
  const int64_t activations = largest(trainer->model().decoder().activation_bytes());
  const int64_t peak = table.overall_peak();
  if (rank == 0) {
    std::printf("\nper rank (largest): sharded state %.2f GiB (parameters %.2f + gradients %.2f + optimizer %.2f), "
                "transient unit buffers %.2f GiB, decoder activations %.2f GiB\n",
                state / kGiB, m.parameter_bytes / kGiB, m.gradient_bytes / kGiB, m.optimizer_bytes / kGiB,
                transient / kGiB, activations / kGiB);
    std::printf("peak RSS %.2f GiB (largest phase peak, largest rank); peak / sharded state = %.2f\n", peak / kGiB,
                static_cast<double>(peak) / static_cast<double>(state));
    std::fflush(stdout);
  }
  trainer.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(work);
  return 0;
}

}  // namespace
}  // namespace trlhpc

int main(int argc, char** argv) {
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  try {
    return trlhpc::run(argc, argv, mpi);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zero3_memory_bench: %s\n", e.what());
    return 1;
  }
}
