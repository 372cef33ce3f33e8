// comm_bench: bandwidth of the Communicator collectives, in the manner of nccl-tests.
//
//   mpirun -np 2 comm_bench [--backend mpi|nccl] [--min_bytes 1024] [--max_bytes 268435456] [--factor 2]
//                           [--timeout 1800]
//
// --timeout: the hang watchdog's limit per collective (0: off, MPI's blocking collectives), so the
// watchdog's cost is the difference between two runs.
//
// For each size S (bytes of the largest buffer, fp32) and each of all_reduce, reduce_scatter,
// all_gather, all_to_all: a few warm-up calls, then --rounds rounds of enough calls to fill
// --seconds / rounds. A round's time is the slowest rank's mean per call; the table shows the median
// round (and the best one: on a shared, oversubscribed machine the median is the honest figure). Conventions as nccl-tests (doc/PERFORMANCE.md), with n ranks:
//   algbw = S / time;   busbw = algbw * 2(n-1)/n for all_reduce, algbw * (n-1)/n for the others,
// so busbw compares with the link bandwidth whatever the collective. After timing, the outputs of the
// last call are checked against their closed form (inputs are small integers) and #wrong is the
// number of wrong elements over all ranks, as in nccl-tests.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include <cuda_runtime.h>

#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/comm/nccl_communicator.hpp"
#endif

namespace trlhpc {
namespace {

enum class Collective { AllReduce, ReduceScatter, AllGather, AllToAll };
constexpr Collective kCollectives[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                                       Collective::AllToAll};
const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "all_gather";
    case Collective::AllToAll: return "all_to_all";
  }
  return "?";
}

// (count) floats in the communicator's memory: a host vector, or a cudaMalloc buffer for NCCL.
class BenchBuffer {
 public:
  BenchBuffer(size_t count, Device device) : count_(count), device_(device) {
    if (device_ == Device::CPU) {
      host_.resize(count);
      data_ = host_.data();
    } else {
#ifdef TRLHPC_HAVE_CUDA
      TRLHPC_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(count, 1) * sizeof(float)));
#endif
    }
  }
  ~BenchBuffer() {
#ifdef TRLHPC_HAVE_CUDA
    if (device_ == Device::CUDA) cudaFree(data_);
#endif
  }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;

  std::span<float> span() { return {data_, count_}; }
  void upload(const std::vector<float>& values) {
    if (device_ == Device::CPU) return std::copy(values.begin(), values.end(), host_.begin()), void();
#ifdef TRLHPC_HAVE_CUDA
    TRLHPC_CHECK_CUDA(cudaMemcpy(data_, values.data(), count_ * sizeof(float), cudaMemcpyHostToDevice));
#endif
  }
  std::vector<float> download() const {
    if (device_ == Device::CPU) return host_;
    std::vector<float> values(count_);
#ifdef TRLHPC_HAVE_CUDA
    TRLHPC_CHECK_CUDA(cudaMemcpy(values.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost));
#endif
    return values;
  }

 private:
  size_t count_;
  Device device_;
  std::vector<float> host_;
  float* data_ = nullptr;
};

double v(int rank, size_t i) { return static_cast<double>(i % 7) + 3.0 * rank; }

struct Shapes {
  size_t in, out;  // element counts of the input and output buffers
};
Shapes shapes(Collective c, size_t elements, int P) {  // elements: count of the largest buffer
  switch (c) {
    case Collective::AllReduce: return {elements, elements};
    case Collective::ReduceScatter: return {elements, elements / P};
    case Collective::AllGather: return {elements / P, elements};
    case Collective::AllToAll: return {elements, elements};
  }
  return {0, 0};
}

double expected(Collective c, size_t j, size_t out_count, int P, int r) {
  const double rank_sum = 3.0 * P * (P - 1) / 2;
  switch (c) {
    case Collective::AllReduce: return P * static_cast<double>(j % 7) + rank_sum;
    case Collective::ReduceScatter: return P * static_cast<double>((r * out_count + j) % 7) + rank_sum;
    case Collective::AllGather: return v(static_cast<int>(j / (out_count / P)), j % (out_count / P));
    case Collective::AllToAll: {
      const size_t m = out_count / P;
      return v(static_cast<int>(j / m), r * m + j % m);
    }
  }
  return 0;
}

CommRequest start(Communicator& comm, Collective c, BenchBuffer& in, BenchBuffer& out) {
  switch (c) {
    case Collective::AllReduce: return comm.all_reduce_async<float>(in.span(), out.span());
    case Collective::ReduceScatter: return comm.reduce_scatter_async<float>(in.span(), out.span());
    case Collective::AllGather: return comm.all_gather_async<float>(in.span(), out.span());
    case Collective::AllToAll: return comm.all_to_all_async<float>(in.span(), out.span());
  }
  return {};
}

// MPI: blocking calls (MPI's tuned blocking algorithms). NCCL: enqueue every call, wait once, as
// nccl-tests does, so the host's per-call synchronisation is not timed.
void run(Communicator& comm, Collective c, BenchBuffer& in, BenchBuffer& out, int calls) {
  if (comm.device() == Device::CPU) {
    for (int i = 0; i < calls; ++i) {
      switch (c) {
        case Collective::AllReduce: comm.all_reduce<float>(in.span(), out.span()); break;
        case Collective::ReduceScatter: comm.reduce_scatter<float>(in.span(), out.span()); break;
        case Collective::AllGather: comm.all_gather<float>(in.span(), out.span()); break;
        case Collective::AllToAll: comm.all_to_all<float>(in.span(), out.span()); break;
      }
    }
    return;
  }
  std::vector<CommRequest> pending;
  for (int i = 0; i < calls; ++i) pending.push_back(start(comm, c, in, out));
  for (auto& p : pending) p.wait();
}

// Slowest rank's seconds per call.
double time_calls(Communicator& comm, MPI_Comm world, Collective c, BenchBuffer& in, BenchBuffer& out, int calls) {
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  run(comm, c, in, out, calls);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  TRLHPC_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, world));
  return seconds;
}

struct Options {
  std::string backend = "mpi";
  size_t min_bytes = 1024, max_bytes = size_t{256} << 20;
  int factor = 2;
  int warmup = 2;
  double seconds_per_size = 0.3;
  int rounds = 5;
  double timeout = kDefaultCollectiveTimeoutSeconds;
};

Options parse(int argc, char** argv) {
  namespace po = boost::program_options;
  Options o;
  po::options_description desc("comm_bench [flags]");
  desc.add_options()("backend", po::value(&o.backend)->default_value(o.backend), "mpi|nccl")
      ("min_bytes", po::value(&o.min_bytes)->default_value(o.min_bytes), "smallest size")
      ("max_bytes", po::value(&o.max_bytes)->default_value(o.max_bytes), "largest size")
      ("factor", po::value(&o.factor)->default_value(o.factor), "size multiplier between rows")
      ("warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed calls per size")
      ("seconds", po::value(&o.seconds_per_size)->default_value(o.seconds_per_size), "timed seconds per size")
      ("rounds", po::value(&o.rounds)->default_value(o.rounds), "timed rounds per size (median reported)")
      ("timeout", po::value(&o.timeout)->default_value(o.timeout), "hang watchdog seconds per collective (0: off)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("comm_bench: ") + e.what());
  }
  TRLHPC_REQUIRE(o.factor >= 2 && o.min_bytes >= 4 && o.max_bytes >= o.min_bytes && o.rounds >= 1,
                 "comm_bench: needs --factor >= 2, 4 <= --min_bytes <= --max_bytes, --rounds >= 1");
  return o;
}

int bench_main(int argc, char** argv, MpiEnvironment& mpi) {
  const Options o = parse(argc, argv);
  MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  std::unique_ptr<Communicator> comm;
  if (o.backend == "mpi") {
    comm = std::make_unique<MpiCommunicator>(world.get(), MpiCommunicatorOptions{.timeout_seconds = o.timeout});
  } else if (o.backend == "nccl") {
#ifdef TRLHPC_HAVE_CUDA
    const Topology topo = Topology::discover(mpi, DeviceRequest::Cuda);
    comm = std::make_unique<NcclCommunicator>(world.get(), topo.gpu_index(), nullptr, o.timeout);
#else
    throw UserError("comm_bench: --backend nccl needs a CUDA build");
#endif
  } else {
    throw UserError("comm_bench: --backend must be mpi or nccl (got " + o.backend + ")");
  }
  const int P = comm->size(), r = comm->rank();
  if (r == 0)
    std::printf("# comm_bench: %s, %d ranks, float32, watchdog timeout %g s, time = slowest rank's mean per call\n\n"
                "| collective | size (B) | count (elements) | time (us) | algbw (GB/s) | busbw (GB/s) | best busbw (GB/s) | #wrong |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|\n",
                comm->backend_name(), P, o.timeout);
  for (Collective c : kCollectives) {
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= static_cast<size_t>(o.factor)) {
      const size_t elements = bytes / sizeof(float) / static_cast<size_t>(P) * static_cast<size_t>(P);
      const Shapes s = shapes(c, elements, P);
      BenchBuffer in(s.in, comm->device()), out(s.out, comm->device());
      std::vector<float> values(s.in);
      for (size_t i = 0; i < s.in; ++i) values[i] = static_cast<float>(v(r, i));
      in.upload(values);
      run(*comm, c, in, out, o.warmup);
      const double once = time_calls(*comm, world.get(), c, in, out, 1);
      const double per_round = o.seconds_per_size / o.rounds;
      const int calls = static_cast<int>(std::clamp(per_round / std::max(once, 1e-7), 2.0, 1000.0));
      std::vector<double> rounds;
      for (int k = 0; k < o.rounds; ++k) rounds.push_back(time_calls(*comm, world.get(), c, in, out, calls));
      std::sort(rounds.begin(), rounds.end());
      const double seconds = rounds[rounds.size() / 2], best = rounds.front();
      const std::vector<float> got = out.download();
      long long wrong = 0;
      for (size_t j = 0; j < got.size(); ++j) wrong += got[j] != static_cast<float>(expected(c, j, s.out, P, r));
      TRLHPC_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, world.get()));
      const double size = static_cast<double>(elements * sizeof(float));
      const double algbw = size / seconds / 1e9;
      const double bus = c == Collective::AllReduce ? 2.0 * (P - 1) / P : static_cast<double>(P - 1) / P;
      if (r == 0)
        std::printf("| %s | %zu | %zu | %.1f | %.3f | %.3f | %.3f | %lld |\n", collective_name(c),
                    elements * sizeof(float), elements, seconds * 1e6, algbw, algbw * bus, size / best / 1e9 * bus, wrong);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace trlhpc

int main(int argc, char** argv) {
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  try {
    return trlhpc::bench_main(argc, argv, mpi);
  } catch (const trlhpc::UserError& e) {
    std::fprintf(stderr, "%serror: %s\n", trlhpc::rank_prefix().c_str(), e.what());
    return 1;
  }
}
