// watchdog_probe: a tiny MPI program for tests/e2e/test_watchdog.sh. Every rank runs `--iterations`
// steps of one all_reduce on the tp group (tp = the whole world) under ProcessGroups with
// `--timeout` seconds, the phase set to "step I". At step 3, rank `--victim` either stops itself
// (`--mode stop`: raise(SIGSTOP), the hang the watchdog must end) or sleeps `--sleep` seconds
// (`--mode sleep`: slow but alive, which must not be taken for a hang). Prints "watchdog_probe: ok" from
// rank 0 when every step's result was right. `--tag` is ignored: it lets the test find its processes.
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/mesh.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

int main(int argc, char** argv) {
  double timeout = 20, sleep_seconds = 3;
  int victim = 1, iterations = 200;
  std::string mode = "stop";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--timeout") timeout = std::atof(value.c_str());
    else if (key == "--sleep") sleep_seconds = std::atof(value.c_str());
    else if (key == "--victim") victim = std::atoi(value.c_str());
    else if (key == "--iterations") iterations = std::atoi(value.c_str());
    else if (key == "--mode") mode = value;
    else if (key != "--tag") {
      std::fprintf(stderr, "watchdog_probe: unknown flag %s\n", key.c_str());
      return 1;
    }
  }
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  try {
    const int world = mpi.world_size(), rank = mpi.world_rank();
    trlhpc::ProcessGroups groups(trlhpc::Mesh(trlhpc::ParallelDims{1, 1, 1, 1, world}.resolved(world)), mpi.world(),
                                 {.timeout_seconds = timeout});
    trlhpc::Communicator& tp = groups.tp().host();
    std::vector<float> data(256);
    for (int step = 0; step < iterations; ++step) {
      groups.set_phase("step " + std::to_string(step));
      if (step == 3 && rank == victim) {
        if (mode == "stop") std::raise(SIGSTOP);
        if (mode == "sleep") std::this_thread::sleep_for(std::chrono::duration<double>(sleep_seconds));
      }
      std::fill(data.begin(), data.end(), static_cast<float>(rank + step));
      tp.all_reduce(std::span<float>(data));
      const float want = static_cast<float>(world * (world - 1) / 2 + world * step);
      for (float x : data)
        if (x != want) throw trlhpc::RuntimeFailure("watchdog_probe: wrong all_reduce result at step " + std::to_string(step));
    }
    groups.world().host().barrier();
    if (rank == 0) std::printf("watchdog_probe: ok (%d steps on %d ranks)\n", iterations, world);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trlhpc: failure: %s%s\n", trlhpc::rank_prefix().c_str(), e.what());
    mpi.abort(2);
  }
}
