// cp_bench: context parallel (ring attention) and Ulysses sequence parallel throughput.
//
//   mpirun -np P cp_bench --mode cp|sp|hybrid [--seq 4096] [--iters 3]   (hybrid: cp 2 x sp P/2)
//                         [--comm_progress none|thread] [--poll_us 200]
//
// With P ranks sharing one row of --seq tokens (one causal document), on cp = P (zigzag shards, ring
// attention) or sp = P (contiguous shards, Ulysses):
//   attention   forward + backward of the attention layer alone (NH 8, KVH 2, HS 32), seconds per
//               call (slowest rank, median of --iters) and tokens/s of the whole row;
//   step        one optimizer step of a small llama (C 256, L 2, NH 8, KVH 2, F 512, V 2048, DDP);
//   both also as CPU seconds per call and rank (the work a rank did, see timed());
//   ring        cp only, per attention layer call (forward + backward): `alone`, the time of the same
//               ring messages sent with nothing to overlap (blocking send_recv, same sizes and count);
//               `wait`, the time blocked on them after the compute they overlap, once every peer had
//               issued them (the cp communicator's AsyncWaitStats); `skew`, the time blocked before
//               that (a peer still computing: load imbalance, not transfer); `bytes hidden`, the share of the bytes whose transfer had completed when that
//               compute ended (RingAttentionStats::bytes_hidden / bytes_sent; the last dK/dV hop has no
//               compute to hide behind); `hidden time` = 1 - wait / alone (clipped to 0..100%), the
//               share of the ring's communication time that compute covered; and the fraction of
//               (query chunk, key chunk) pairs skipped as fully masked.
// --comm_progress thread: a progress thread (progress_thread.hpp) tests the ring's outstanding
// transfers while the attention blocks compute; none: only the ring's own test() calls between blocks.
// Prints one Markdown table row (rank 0), so bench/cp_bench.sh can build the table of RESULTS.md.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/ops/backend.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/comm/progress_thread.hpp"
#include "trlhpc/parallel/sequence/ring_attention.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

using Clock = std::chrono::steady_clock;

double slowest(double seconds) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
// Wall time of f() on the slowest rank, all ranks starting together; adds this rank's CPU time of it
// to *cpu (on a loaded or oversubscribed machine the CPU time shows the work a rank does, the wall
// time also the time it waited for a core; MPI's busy polling while blocked counts as CPU time).
template <class F>
double timed(F&& f, double* cpu = nullptr) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  f();
  if (cpu) *cpu += cpu_seconds() - c0;
  return slowest(std::chrono::duration<double>(Clock::now() - t0).count());
}
// Mean over ranks.
double mean_over_ranks(double x) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return x / n;
}

Batch causal_row(int64_t T, int64_t vocab) {
  Batch b;
  b.rows = 1;
  b.seq_len = T;
  for (int64_t t = 0; t < T; ++t) {
    b.input_ids.push_back(static_cast<int32_t>((t * 7919) % vocab));
    b.targets.push_back(t + 1 < T ? static_cast<int32_t>(((t + 1) * 7919) % vocab) : kIgnoreIndex);
    b.positions.push_back(static_cast<int32_t>(t));
    b.doc_ids.push_back(0);
  }
  return b;
}

Tensor upload(Ops& ops, const std::vector<int32_t>& host) {
  Tensor t = ops.allocate({static_cast<int64_t>(host.size())}, DType::I32);
  ops.copy_from_host(t, host.data(), host.size() * sizeof(int32_t));
  return t;
}
Tensor random_tensor(Ops& ops, int64_t n, uint32_t seed) {
  std::vector<float> host(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : host) x = x * 1664525u + 1013904223u, f = static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  Tensor t = ops.allocate({n});
  ops.copy_from_host(t, host.data(), host.size() * sizeof(float));
  return t;
}

struct Row {
  double attention = 0, step = 0, ring_wait = 0, ring_skew = 0, ring_alone = 0, hidden = 0, skipped = 0;
  double attention_cpu = 0, step_cpu = 0;  // per call, mean over ranks
};

Row run(const std::string& mode, int64_t T, int iters, const MpiCommunicatorOptions& comm_options,
        const Topology& topology) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const bool cp = mode == "cp", hybrid = mode == "hybrid";
  // The attention below has 8 heads: sp must divide them.
  if (hybrid && (world < 4 || world % 2 != 0 || 8 % (world / 2) != 0))
    throw UserError("--mode hybrid needs 4, 8 or 16 ranks (cp 2 x sp np/2, sp dividing the 8 heads)");
  const ParallelDims dims = hybrid ? ParallelDims{1, 1, 2, world / 2, 1}.resolved(world)
                                   : ParallelDims{1, 1, cp ? world : 1, cp ? 1 : world, 1}.resolved(world);
  ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD, comm_options);
  auto ops = make_ops(topology);

  // A small llama laid out as trlhpc sft would (parallelize): its sequence attention is also the one
  // timed alone below. At cp = sp = 1 that is LocalAttention (before the parallelize refactor the sp 1
  // row timed Ulysses over a group of one).
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 256, c.intermediate_size = 512, c.num_hidden_layers = 2, c.num_attention_heads = 8;
  c.num_key_value_heads = 2, c.head_dim = 32, c.vocab_size = 2048, c.max_position_embeddings = T;
  Trainer trainer(c, *ops, groups, TrainerOptions{});
  ParallelModel& model = trainer.model();
  model.load_weights(weights_from_init(c, 1));
  SequenceAttention* attention = &model.sequence_attention();
  RingAttention* ring = cp ? dynamic_cast<RingAttention*>(attention) : nullptr;
  Row row;

  // Attention alone.
  const int64_t NH = 8, KVH = 2, HS = 32;
  const Batch local = model.shard_tokens(causal_row(T, 2048));
  const int64_t Tl = local.seq_len;
  const AttentionShape s{1, Tl, Tl, NH, KVH, HS, 1.0f / std::sqrt(float(HS))};
  const Tensor q = random_tensor(*ops, Tl * NH * HS, 1), k = random_tensor(*ops, Tl * KVH * HS, 2);
  const Tensor v = random_tensor(*ops, Tl * KVH * HS, 3), dout = random_tensor(*ops, Tl * NH * HS, 4);
  const Tensor pos = upload(*ops, local.positions), doc = upload(*ops, local.doc_ids);
  const Tensor o = ops->allocate({Tl * NH * HS}), lse = ops->allocate({Tl * NH});
  const Tensor dq = ops->allocate({Tl * NH * HS}), dk = ops->allocate({Tl * KVH * HS}), dv = ops->allocate({Tl * KVH * HS});
  auto layer = [&] {
    attention->forward(*ops, q, k, v, pos, doc, o, lse, s);
    attention->backward(*ops, q, k, v, o, lse, dout, pos, doc, dq, dk, dv, s);
  };
  layer();  // warm-up (allocates the workspace)
  if (ring) ring->reset_stats();
  const AsyncWaitStats& cp_waits = dynamic_cast<MpiCommunicator&>(groups.cp().device()).async_wait();
  const AsyncWaitStats waits_before = cp_waits;
  std::vector<double> times;
  double cpu = 0;
  for (int i = 0; i < iters; ++i) times.push_back(timed(layer, &cpu));
  // The ring's blocked time split as dp_bench splits it: after every peer issued the transfer (wait)
  // and before (skew: a peer still computing its previous block).
  const double skew = cp_waits.before_peers - waits_before.before_peers;
  row.ring_skew = slowest(skew / iters);
  row.attention = median(times);
  row.attention_cpu = mean_over_ranks(cpu / iters);
  if (ring) {
    const RingAttentionStats& st = ring->stats();
    row.ring_wait = slowest((cp_waits.seconds - waits_before.seconds - skew) / iters);
    row.skipped = static_cast<double>(st.chunk_pairs_skipped) / static_cast<double>(st.chunk_pairs);
    double bytes[2] = {static_cast<double>(st.bytes_hidden), static_cast<double>(st.bytes_sent)};
    MPI_Allreduce(MPI_IN_PLACE, bytes, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    row.hidden = bytes[1] > 0 ? bytes[0] / bytes[1] : 0.0;
    // The same messages with nothing to overlap: per layer call, forward P-1 hops of K/V + metadata,
    // backward P-1 of those and P of dK/dV.
    Communicator& comm = groups.cp().device();
    const int P = comm.size(), next = (comm.rank() + 1) % P, prev = (comm.rank() + P - 1) % P;
    std::vector<float> kv(static_cast<size_t>(2 * Tl * KVH * HS)), kv_in(kv.size());
    std::vector<int32_t> meta(static_cast<size_t>(2 * Tl)), meta_in(meta.size());
    std::vector<double> alone;
    for (int i = 0; i < iters; ++i)
      alone.push_back(timed([&] {
        for (int hop = 0; hop < 2 * (P - 1); ++hop) {
          comm.send_recv<float>(kv, next, kv_in, prev);
          comm.send_recv<int32_t>(meta, next, meta_in, prev);
        }
        for (int hop = 0; hop < P; ++hop) comm.send_recv<float>(kv, next, kv_in, prev);
      }));
    row.ring_alone = median(alone);
  }

  // A full training step of the small model on the row.
  const std::vector<Batch> micro = {model.shard_tokens(causal_row(T, c.vocab_size))};
  trainer.step(micro, 1e-4);  // warm-up
  times.clear();
  cpu = 0;
  for (int i = 0; i < iters; ++i) times.push_back(timed([&] { trainer.step(micro, 1e-4); }, &cpu));
  row.step = median(times);
  row.step_cpu = mean_over_ranks(cpu / iters);
  return row;
}

}  // namespace
}  // namespace trlhpc

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string mode = "cp";
  int64_t seq = 4096;
  int iters = 3;
  std::string comm_progress = "none";
  int poll_us = static_cast<int>(trlhpc::kDefaultProgressPollInterval.count());
  po::options_description desc("cp_bench");
  desc.add_options()("mode", po::value(&mode), "cp (ring attention), sp (Ulysses) or hybrid (cp 2 x sp np/2)")("seq", po::value(&seq),
                                                                                       "tokens in the row")(
      "iters", po::value(&iters), "timed repetitions (median)")(
      "comm_progress", po::value(&comm_progress), "none|thread: who progresses the ring's transfers between its test() calls")(
      "poll_us", po::value(&poll_us), "progress thread: microseconds between polls");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  trlhpc::Row r;
  try {
    trlhpc::MpiCommunicatorOptions comm_options;
    comm_options.progress = trlhpc::make_progress_thread(trlhpc::parse_comm_progress(comm_progress), nullptr,
                                                         std::chrono::microseconds(poll_us));
    r = trlhpc::run(mode, seq, iters, comm_options, trlhpc::Topology::discover(mpi, trlhpc::DeviceRequest::Cpu));
  } catch (const trlhpc::UserError& e) {  // raised on every rank alike, before any collective
    if (mpi.world_rank() == 0) std::fprintf(stderr, "cp_bench: %s\n", e.what());
    return 1;
  }
  if (mpi.world_rank() == 0) {
    const double tokens = static_cast<double>(seq);
    const std::string layout =
        mode == "hybrid" ? "cp 2 x sp " + std::to_string(mpi.world_size() / 2) : mode + " " + std::to_string(mpi.world_size());
    const std::string progress = comm_progress == "thread" ? "thread " + std::to_string(poll_us) + " us" : comm_progress;
    std::printf("| %s | %s | %lld | %.3f | %.3f | %.0f | %.3f | %.3f | %.0f |", layout.c_str(),
                progress.c_str(), static_cast<long long>(seq), r.attention, r.attention_cpu, tokens / r.attention, r.step, r.step_cpu,
                tokens / r.step);
    if (mode == "cp")
      std::printf(" %.1f | %.1f | %.1f | %.0f%% | %.0f%% | %.0f%% |\n", 1e3 * r.ring_alone, 1e3 * r.ring_wait, 1e3 * r.ring_skew,
                  100.0 * std::clamp(r.ring_alone > 0 ? 1.0 - r.ring_wait / r.ring_alone : 0.0, 0.0, 1.0),
                  100.0 * r.hidden, 100.0 * r.skipped);
    else
      std::printf(" - | - | - | - | - | - |\n");
  }
  return 0;
}
