#pragma once
// Shared pieces of the ring (cp) and Ulysses (sp) layer tests: groups of P ranks cut out of the
// world, attention inputs with packed documents, and the single-rank reference every rank computes on
// the whole (padded) sequence with LocalAttention.
//
// A P-rank layout runs whenever P divides the world size: the world splits into world/P independent
// groups (MPI_Comm_split, color = rank / P), each checked against the reference. So np = 1 runs P = 1,
// np = 8 runs P = 1, 2, 4 (four groups of 2, two of 4), and every np runs the same cases.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/parallel/sequence/sequence_shard.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc::testing {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A group of P consecutive world ranks and its communicator.
struct RankGroup {
  MpiComm comm;
  std::unique_ptr<MpiCommunicator> communicator;
  explicit RankGroup(int P)
      : comm(MpiComm::split(MPI_COMM_WORLD, world_rank() / P, world_rank() % P)),
        communicator(std::make_unique<MpiCommunicator>(comm.get())) {}
};

// The group sizes among `candidates` that divide the world size.
inline std::vector<int> group_sizes(std::initializer_list<int> candidates) {
  std::vector<int> out;
  for (int P : candidates)
    if (world_size() % P == 0) out.push_back(P);
  return out;
}

struct AttentionCase {
  std::string name;
  int64_t B = 2, T = 64;  // T before padding to the shard's chunk count
  int64_t NH = 4, KVH = 2, HS = 16;
  bool packed = false;    // several documents per row (odd lengths, crossing chunk boundaries) + padding
  uint64_t seed = 1;
  int64_t window = 0;     // sliding window (AttentionShape::window), 0 = none
};

// Positions and doc ids of the case (ids and targets unused by attention): one causal document per
// row, or documents of random odd/even lengths 1..T/3 followed by a padding tail on some rows.
inline Batch case_rows(const AttentionCase& c) {
  std::mt19937_64 rng(c.seed);
  Batch b;
  b.rows = c.B;
  b.seq_len = c.T;
  for (int64_t r = 0; r < c.B; ++r) {
    int64_t t = 0;
    int32_t doc = 0;
    const int64_t used = c.packed && r % 2 == 1 ? c.T - 1 - static_cast<int64_t>(rng() % (c.T / 4 + 1)) : c.T;
    while (t < used) {
      const int64_t len = c.packed ? std::min<int64_t>(used - t, 1 + static_cast<int64_t>(rng() % (c.T / 3 + 1))) : used;
      for (int64_t i = 0; i < len; ++i, ++t) {
        b.positions.push_back(static_cast<int32_t>(i));
        b.doc_ids.push_back(doc);
      }
      ++doc;
    }
    for (; t < c.T; ++t) b.positions.push_back(0), b.doc_ids.push_back(kPaddingDocId);
  }
  b.input_ids.assign(b.positions.size(), 0);
  b.targets.assign(b.positions.size(), kIgnoreIndex);
  return b;
}

// Global token index (b * T + t of the padded batch) of each local token of `shard`.
inline std::vector<int64_t> local_to_global(int64_t B, int64_t T_padded, const SequenceShard& shard) {
  Batch iota;
  iota.rows = B;
  iota.seq_len = T_padded;
  iota.input_ids.resize(static_cast<size_t>(B * T_padded));
  std::iota(iota.input_ids.begin(), iota.input_ids.end(), 0);
  iota.targets = iota.positions = iota.doc_ids = iota.input_ids;
  const Batch local = shard_sequence(iota, shard);
  return std::vector<int64_t>(local.input_ids.begin(), local.input_ids.end());
}

// Rows `index` of a (tokens, width) array.
inline std::vector<float> take_tokens(const std::vector<float>& full, int64_t width, const std::vector<int64_t>& index) {
  std::vector<float> out(index.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < index.size(); ++i)
    std::copy_n(full.begin() + index[i] * width, width, out.begin() + static_cast<int64_t>(i) * width);
  return out;
}
inline std::vector<int32_t> take_ids(const std::vector<int32_t>& full, const std::vector<int64_t>& index) {
  std::vector<int32_t> out(index.size());
  for (size_t i = 0; i < index.size(); ++i) out[i] = full[static_cast<size_t>(index[i])];
  return out;
}

inline Tensor upload(Ops& ops, const std::vector<float>& host) {
  Tensor t = ops.allocate({static_cast<int64_t>(host.size())});
  ops.copy_from_host(t, host.data(), host.size() * sizeof(float));
  return t;
}
inline Tensor upload(Ops& ops, const std::vector<int32_t>& host) {
  Tensor t = ops.allocate({static_cast<int64_t>(host.size())}, DType::I32);
  ops.copy_from_host(t, host.data(), host.size() * sizeof(int32_t));
  return t;
}
inline std::vector<float> download(Ops& ops, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  ops.copy_to_host(host.data(), t, host.size() * sizeof(float));
  return host;
}

// The whole padded problem and its single-rank answer (LocalAttention).
struct FullAttention {
  Batch rows;  // padded positions / doc ids (B, T)
  std::vector<float> q, k, v, dout;          // (B, T, NH|KVH, HS)
  std::vector<float> o, lse, dq, dk, dv;     // reference outputs; lse (B, NH, T)
};

inline FullAttention full_attention(Ops& ops, const AttentionCase& c, int64_t chunk_multiple) {
  FullAttention f;
  f.rows = pad_sequence(case_rows(c), chunk_multiple);
  const int64_t N = f.rows.tokens();
  f.q = random_floats(static_cast<size_t>(N * c.NH * c.HS), c.seed * 11 + 1);
  f.k = random_floats(static_cast<size_t>(N * c.KVH * c.HS), c.seed * 11 + 2);
  f.v = random_floats(static_cast<size_t>(N * c.KVH * c.HS), c.seed * 11 + 3);
  f.dout = random_floats(static_cast<size_t>(N * c.NH * c.HS), c.seed * 11 + 4);
  AttentionShape s{c.B, f.rows.seq_len, f.rows.seq_len, c.NH, c.KVH, c.HS, 1.0f / std::sqrt(float(c.HS)), c.window};
  const Tensor q = upload(ops, f.q), k = upload(ops, f.k), v = upload(ops, f.v), dout = upload(ops, f.dout);
  const Tensor pos = upload(ops, f.rows.positions), doc = upload(ops, f.rows.doc_ids);
  const Tensor o = ops.allocate(q.shape()), lse = ops.allocate({c.B * c.NH * f.rows.seq_len});
  const Tensor dq = ops.allocate(q.shape()), dk = ops.allocate(k.shape()), dv = ops.allocate(v.shape());
  LocalAttention local;
  local.forward(ops, q, k, v, pos, doc, o, lse, s);
  local.backward(ops, q, k, v, o, lse, dout, pos, doc, dq, dk, dv, s);
  f.o = download(ops, o), f.lse = download(ops, lse), f.dq = download(ops, dq), f.dk = download(ops, dk),
  f.dv = download(ops, dv);
  return f;
}

// max |got - want| / max |want|; the test bound is on this scale-relative error (fp32 summation
// order is the only difference from the reference, so it stays near 1e-7).
inline double scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      EXPECT_EQ(got[i], want[i]) << "index " << i;
      continue;
    }
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return worst / std::max(scale, 1e-30);
}

// This rank's tokens of the reference problem on the device, and output buffers of the same shapes.
struct ShardedAttention {
  AttentionShape shape;                  // B, Tl = T / P, Tl, NH, KVH, HS
  Tensor q, k, v, dout, pos, doc;        // inputs: the tokens `index` of the reference arrays
  Tensor o, lse, dq, dk, dv;             // outputs to be filled by the attention under test

  ShardedAttention(Ops& ops, const FullAttention& f, const AttentionCase& c, const std::vector<int64_t>& index) {
    const int64_t Tl = static_cast<int64_t>(index.size()) / c.B, QW = c.NH * c.HS, KW = c.KVH * c.HS;
    shape = AttentionShape{c.B, Tl, Tl, c.NH, c.KVH, c.HS, 1.0f / std::sqrt(float(c.HS)), c.window};
    q = upload(ops, take_tokens(f.q, QW, index)), k = upload(ops, take_tokens(f.k, KW, index));
    v = upload(ops, take_tokens(f.v, KW, index)), dout = upload(ops, take_tokens(f.dout, QW, index));
    pos = upload(ops, take_ids(f.rows.positions, index)), doc = upload(ops, take_ids(f.rows.doc_ids, index));
    o = ops.allocate(q.shape()), lse = ops.allocate({c.B * c.NH * Tl});
    dq = ops.allocate(q.shape()), dk = ops.allocate(k.shape()), dv = ops.allocate(v.shape());
  }
  void forward(Ops& ops, SequenceAttention& attention) const {
    attention.forward(ops, q, k, v, pos, doc, o, lse, shape);
  }
  void backward(Ops& ops, SequenceAttention& attention) const {
    attention.backward(ops, q, k, v, o, lse, dout, pos, doc, dq, dk, dv, shape);
  }

  // Expects o, lse (against `lse_want`, the reference in the attention's own lse layout), dq, dk and
  // dv within `bound` of the reference (scaled_error); returns the worst of the five.
  double expect_matches(Ops& ops, const FullAttention& f, const AttentionCase& c, const std::vector<int64_t>& index,
                        const std::vector<float>& lse_want, double bound) const {
    const int64_t QW = c.NH * c.HS, KW = c.KVH * c.HS;
    const double errors[] = {scaled_error(download(ops, o), take_tokens(f.o, QW, index)),
                             scaled_error(download(ops, lse), lse_want),
                             scaled_error(download(ops, dq), take_tokens(f.dq, QW, index)),
                             scaled_error(download(ops, dk), take_tokens(f.dk, KW, index)),
                             scaled_error(download(ops, dv), take_tokens(f.dv, KW, index))};
    const char* names[] = {"o", "lse", "dq", "dk", "dv"};
    double worst = 0;
    for (int i = 0; i < 5; ++i) {
      EXPECT_LE(errors[i], bound) << names[i];
      worst = std::max(worst, errors[i]);
    }
    return worst;
  }
};

// The worst scaled error over the whole test, all-reduced and printed once by world rank 0.
inline void report_worst_error(const char* what, double local_worst) {
  double worst = local_worst;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (world_rank() == 0) std::printf("[ measured ] %s: worst max|err|/max|ref| = %.3g\n", what, worst);
}

}  // namespace trlhpc::testing
