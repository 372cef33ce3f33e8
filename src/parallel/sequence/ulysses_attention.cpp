// Ulysses sequence parallel attention: all-to-all between sequence and head sharding around the
// attention primitive. The method, its sources and the GQA rule are in
// include/trlhpc/parallel/sequence/ulysses_attention.hpp.
//
// The all-to-all exchanges equal blocks, block d going to rank d (communicator.hpp:
// out[s*m + i] = in_s[r*m + i]). Layouts, with Tl = T/P, heads H (or KVH' after repetition), Hl = H/P:
//   sequence -> heads   pack   x (B, Tl, H, HS)  -> send (P, B, Tl, Hl, HS)   block d = heads of rank d
//                       a2a    recv (P, B, Tl, Hl, HS)                        block s = tokens of rank s
//                       unpack recv -> y (B, T, Hl, HS)                       token s*Tl + t of the row
//   heads -> sequence   the same three steps backwards; unpacking ADDS into the zeroed x, which sums
//                       the dk/dv of repeated kv heads and is a plain copy otherwise.
// Packing copies contiguous runs through Ops::copy / Ops::add_inplace, so it works on any device.
// Dtypes: q, k, v, o and dout travel in the activations' dtype (BF16 under --bf16: half the bytes, and
// exact, since they are stored so; the head-sharded attention output is rounded once, as the
// 1-process kernel rounds it); dq, dk, dv in theirs (F32), so they are never rounded on the way.
#include "trlhpc/parallel/sequence/ulysses_attention.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trlhpc/core/allocation_counter.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/comm/tensor_collectives.hpp"

namespace trlhpc {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A run of consecutive heads of block d: local heads [local, local + count) come from the source
// heads [source, source + count).
struct HeadRun {
  int64_t local, source, count;
};

// Runs of every block: expanded head e = d*Hl + j is source head e / rep.
std::vector<std::vector<HeadRun>> head_runs(int64_t H, int64_t rep, int P) {
  const int64_t Hl = H * rep / P;
  std::vector<std::vector<HeadRun>> runs(static_cast<size_t>(P));
  for (int d = 0; d < P; ++d)
    for (int64_t j = 0; j < Hl; ++j) {
      const int64_t source = (d * Hl + j) / rep;
      auto& r = runs[static_cast<size_t>(d)];
      if (!r.empty() && r.back().source + r.back().count == source)
        ++r.back().count;
      else
        r.push_back({j, source, 1});
    }
  return runs;
}

}  // namespace

struct UlyssesAttention::Workspace {
  int64_t B = 0, Tl = 0, NH = 0, KVH = 0, HS = 0;
  int P = 1;
  int64_t rep = 1;             // copies of each kv head (KVH < P)
  int64_t NHl = 0, KVHl = 0;   // heads per rank after the all-to-all
  DType act_dtype = DType::F32;  // of q, k, v, o, dout
  Tensor send, recv;           // (P, B, Tl, max(NHl, KVHl), HS) F32 staging for one all-to-all
  Tensor send_act, recv_act;   // the same in act_dtype when it is not F32 (else empty)
  Tensor qh, oh, doh;          // (B, T, NHl, HS) act_dtype
  Tensor dqh;                  // (B, T, NHl, HS) F32
  Tensor kh, vh;               // (B, T, KVHl, HS) act_dtype
  Tensor dkh, dvh;             // (B, T, KVHl, HS) F32
  Tensor ids_all;              // (P, B, Tl) I32 all-gathered positions or doc ids
  Tensor pos_full, doc_full;   // (B, T) I32
  std::vector<std::vector<HeadRun>> q_runs, kv_runs;  // (P) each

  int64_t T() const { return Tl * P; }
  bool fits(const AttentionShape& s, int p, DType act) const {
    return B == s.B && Tl == s.Tq && NH == s.NH && KVH == s.KVH && HS == s.HS && P == p && act_dtype == act;
  }
  int64_t bytes() const {
    int64_t n = 0;
    for (const Tensor* t : {&send, &recv, &send_act, &recv_act, &qh, &oh, &doh, &dqh, &kh, &vh, &dkh, &dvh, &ids_all,
                            &pos_full, &doc_full})
      n += t->data() ? static_cast<int64_t>(t->nbytes()) : 0;
    return n;
  }
  // The staging pair for tensors of dtype `d`.
  const Tensor& send_for(DType d) const { return d == DType::F32 ? send : send_act; }
  const Tensor& recv_for(DType d) const { return d == DType::F32 ? recv : recv_act; }
};

UlyssesAttention::UlyssesAttention(Communicator& sp, std::unique_ptr<SequenceAttention> inner, DType gradient_dtype)
    : comm_(sp), inner_(std::move(inner)), gradient_dtype_(gradient_dtype) {
  TRLHPC_ASSERT(gradient_dtype == DType::F32 || gradient_dtype == DType::BF16,
                "Ulysses gradient exchange dtype must be F32 or BF16");
}
UlyssesAttention::~UlyssesAttention() = default;

int64_t UlyssesAttention::workspace_bytes() const { return ws_ ? ws_->bytes() : 0; }

namespace {

// Every buffer of a workspace for local shape s over P ranks, each from alloc(shape, dtype): one
// routine for the real buffers (Ops::allocate) and the memory plan (a byte counter).
template <class Alloc>
void allocate_ulysses_buffers(UlyssesAttention::Workspace& w, const AttentionShape& s, int P, DType act_dtype,
                              Alloc&& alloc) {
  w.B = s.B, w.Tl = s.Tq, w.NH = s.NH, w.KVH = s.KVH, w.HS = s.HS, w.P = P;
  w.act_dtype = act_dtype;
  const AttentionShape heads = UlyssesAttention::head_sharded_shape(s, P);
  w.NHl = heads.NH;
  w.KVHl = heads.KVH;
  w.rep = w.KVHl * P / s.KVH;
  const int64_t T = w.T();
  const Shape staging{int64_t{P} * w.B * w.Tl * std::max(w.NHl, w.KVHl) * w.HS};
  w.send = alloc(staging, DType::F32);
  w.recv = alloc(staging, DType::F32);
  if (act_dtype != DType::F32) {
    w.send_act = alloc(staging, act_dtype);
    w.recv_act = alloc(staging, act_dtype);
  }
  for (Tensor* t : {&w.qh, &w.oh, &w.doh}) *t = alloc(Shape{w.B, T, w.NHl, w.HS}, act_dtype);
  w.dqh = alloc(Shape{w.B, T, w.NHl, w.HS}, DType::F32);
  for (Tensor* t : {&w.kh, &w.vh}) *t = alloc(Shape{w.B, T, w.KVHl, w.HS}, act_dtype);
  for (Tensor* t : {&w.dkh, &w.dvh}) *t = alloc(Shape{w.B, T, w.KVHl, w.HS}, DType::F32);
  w.ids_all = alloc(Shape{int64_t{P} * w.B * w.Tl}, DType::I32);
  w.pos_full = alloc(Shape{w.B, T}, DType::I32);
  w.doc_full = alloc(Shape{w.B, T}, DType::I32);
}

}  // namespace

UlyssesAttention::Workspace& UlyssesAttention::workspace(Ops& ops, const AttentionShape& s, DType act_dtype) {
  const int P = comm_.size();
  if (ws_ && ws_->fits(s, P, act_dtype)) return *ws_;
  TRLHPC_ASSERT(s.Tq == s.Tk, "Ulysses attention takes self-attention of the local tokens");
  TRLHPC_ASSERT(s.NH % P == 0 && (s.KVH % P == 0 || P % s.KVH == 0),
                "Ulysses over sp " + std::to_string(P) + " needs num_attention_heads " + std::to_string(s.NH) +
                    " divisible by it and num_key_value_heads " + std::to_string(s.KVH) +
                    " dividing or divisible by it (ParallelDims::validate_model)");
  ws_ = std::make_unique<Workspace>();
  Workspace& w = *ws_;
  allocate_ulysses_buffers(w, s, P, act_dtype, [&ops](const Shape& shape, DType dtype) { return ops.allocate(shape, dtype); });
  w.q_runs = head_runs(s.NH, 1, P);
  w.kv_runs = head_runs(s.KVH, w.rep, P);
  return w;
}

AttentionShape UlyssesAttention::head_sharded_shape(const AttentionShape& s, int sp) {
  const int64_t rep = s.KVH % sp == 0 ? 1 : sp / s.KVH;  // copies of each kv head when there are fewer than sp
  AttentionShape h = s;
  h.Tq = h.Tk = s.Tq * sp;
  h.NH = s.NH / sp;
  h.KVH = s.KVH * rep / sp;
  return h;
}

int64_t UlyssesAttention::planned_workspace_bytes(const AttentionShape& s, int sp, DType act_dtype) {
  Workspace w;
  AllocationCounter counter;
  allocate_ulysses_buffers(w, s, sp, act_dtype, counter);
  return counter.bytes;
}

namespace {

using Workspace = UlyssesAttention::Workspace;

// x (B, Tl, H, HS) sequence-sharded -> y (B, T, Hl, HS) head-sharded; `runs` maps local heads of each
// block to source heads of x (repeating kv heads when rep > 1).
void sequence_to_heads(Ops& ops, Communicator& comm, Workspace& w, const Tensor& x, int64_t H,
                       const std::vector<std::vector<HeadRun>>& runs, int64_t Hl, const Tensor& y,
                       UlyssesAttentionStats& stats) {
  const int64_t HS = w.HS, block = w.B * w.Tl * Hl * HS, n = w.P * block;
  const Tensor &send = w.send_for(x.dtype()), &recv = w.recv_for(x.dtype());
  for (int d = 0; d < w.P; ++d)
    for (int64_t b = 0; b < w.B; ++b)
      for (int64_t t = 0; t < w.Tl; ++t)
        for (const HeadRun& r : runs[static_cast<size_t>(d)])
          ops.copy(send.view({r.count * HS}, d * block + ((b * w.Tl + t) * Hl + r.local) * HS),
                   x.view({r.count * HS}, ((b * w.Tl + t) * H + r.source) * HS));
  all_to_all_tensor(comm, send, recv, n);
  stats.bytes_sent += (w.P - 1) * block * static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t rows = w.Tl * Hl * HS;  // one (s, b) run: Tl tokens of Hl heads
  for (int s = 0; s < w.P; ++s)
    for (int64_t b = 0; b < w.B; ++b)
      ops.copy(y.view({rows}, (b * w.T() + s * w.Tl) * Hl * HS), recv.view({rows}, (s * w.B + b) * rows));
}

// y (B, T, Hl, HS) head-sharded -> x (B, Tl, H, HS) sequence-sharded; source heads that `runs` repeats
// receive the sum of their copies. y travels in its own dtype; x may be wider (F32 x from BF16 y: the
// BF16-exchanged gradients widened as they are summed).
void heads_to_sequence(Ops& ops, Communicator& comm, Workspace& w, const Tensor& y, int64_t H,
                       const std::vector<std::vector<HeadRun>>& runs, int64_t Hl, const Tensor& x,
                       UlyssesAttentionStats& stats) {
  const int64_t HS = w.HS, block = w.B * w.Tl * Hl * HS, n = w.P * block, rows = w.Tl * Hl * HS;
  const Tensor &send = w.send_for(y.dtype()), &recv = w.recv_for(y.dtype());
  for (int d = 0; d < w.P; ++d)
    for (int64_t b = 0; b < w.B; ++b)
      ops.copy(send.view({rows}, (d * w.B + b) * rows), y.view({rows}, (b * w.T() + d * w.Tl) * Hl * HS));
  all_to_all_tensor(comm, send, recv, n);
  stats.bytes_sent += (w.P - 1) * block * static_cast<int64_t>(dtype_size(y.dtype()));
  ops.fill_zero(x);
  for (int s = 0; s < w.P; ++s)
    for (int64_t b = 0; b < w.B; ++b)
      for (int64_t t = 0; t < w.Tl; ++t)
        for (const HeadRun& r : runs[static_cast<size_t>(s)])
          ops.add_inplace(x.view({r.count * HS}, ((b * w.Tl + t) * H + r.source) * HS),
                          recv.view({r.count * HS}, s * block + ((b * w.Tl + t) * Hl + r.local) * HS));
}

// Positions or doc ids of the whole row: all-gather (P, B, Tl) and reorder to (B, T).
void gather_ids(Ops& ops, Communicator& comm, Workspace& w, const Tensor& ids, const Tensor& full,
                UlyssesAttentionStats& stats) {
  const int64_t local = w.B * w.Tl;
  comm.all_gather(span_of<const int32_t>(ids, local), span_of<int32_t>(w.ids_all, w.P * local));
  stats.bytes_sent += (w.P - 1) * local * static_cast<int64_t>(sizeof(int32_t));
  for (int s = 0; s < w.P; ++s)
    for (int64_t b = 0; b < w.B; ++b)
      ops.copy(full.view({w.Tl}, b * w.T() + s * w.Tl), w.ids_all.view({w.Tl}, (s * w.B + b) * w.Tl));
}

// What forward and backward both need head-sharded: the whole row's positions and doc ids, and q, k, v.
void gather_inputs(Ops& ops, Communicator& comm, Workspace& w, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& pos, const Tensor& doc, UlyssesAttentionStats& stats) {
  gather_ids(ops, comm, w, pos, w.pos_full, stats);
  gather_ids(ops, comm, w, doc, w.doc_full, stats);
  sequence_to_heads(ops, comm, w, q, w.NH, w.q_runs, w.NHl, w.qh, stats);
  sequence_to_heads(ops, comm, w, k, w.KVH, w.kv_runs, w.KVHl, w.kh, stats);
  sequence_to_heads(ops, comm, w, v, w.KVH, w.kv_runs, w.KVHl, w.vh, stats);
}

}  // namespace

void UlyssesAttention::forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos,
                               const Tensor& doc, const Tensor& o, const Tensor& lse, const AttentionShape& s) {
  Workspace& w = workspace(ops, s, q.dtype());
  ++stats_.forward_calls;
  auto t0 = Clock::now();
  gather_inputs(ops, comm_, w, q, k, v, pos, doc, stats_);
  stats_.comm_seconds += since(t0);
  t0 = Clock::now();
  SequenceAttention& inner = inner_ ? *inner_ : local_;
  inner.forward(ops, w.qh, w.kh, w.vh, w.pos_full, w.doc_full, w.oh, lse.view({w.B, w.NHl, w.T()}),
                head_sharded_shape(s, w.P));
  stats_.compute_seconds += since(t0);
  t0 = Clock::now();
  heads_to_sequence(ops, comm_, w, w.oh, w.NH, w.q_runs, w.NHl, o, stats_);
  stats_.comm_seconds += since(t0);
}

void UlyssesAttention::backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                const Tensor& lse, const Tensor& dout, const Tensor& pos, const Tensor& doc,
                                const Tensor& dq, const Tensor& dk, const Tensor& dv, const AttentionShape& s) {
  Workspace& w = workspace(ops, s, q.dtype());
  ++stats_.backward_calls;
  auto t0 = Clock::now();
  gather_inputs(ops, comm_, w, q, k, v, pos, doc, stats_);
  sequence_to_heads(ops, comm_, w, o, w.NH, w.q_runs, w.NHl, w.oh, stats_);
  sequence_to_heads(ops, comm_, w, dout, w.NH, w.q_runs, w.NHl, w.doh, stats_);
  stats_.comm_seconds += since(t0);
  t0 = Clock::now();
  SequenceAttention& inner = inner_ ? *inner_ : local_;  // overwrites dqh, dkh, dvh
  inner.backward(ops, w.qh, w.kh, w.vh, w.oh, lse.view({w.B, w.NHl, w.T()}), w.doh, w.pos_full, w.doc_full, w.dqh,
                 w.dkh, w.dvh, head_sharded_shape(s, w.P));
  stats_.compute_seconds += since(t0);
  t0 = Clock::now();
  // seq_parallel_communication_data_type bf16 under --bf16: round the F32 gradients into the BF16
  // head-sharded buffers that are free now (doh, kh, vh: same shapes) and send those.
  const bool bf16_grads = gradient_dtype_ == DType::BF16 && w.act_dtype == DType::BF16;
  const auto sent = [&](const Tensor& grad, const Tensor& spare) {
    if (!bf16_grads) return grad;
    ops.cast(spare, grad);
    return spare;
  };
  heads_to_sequence(ops, comm_, w, sent(w.dqh, w.doh), w.NH, w.q_runs, w.NHl, dq, stats_);
  heads_to_sequence(ops, comm_, w, sent(w.dkh, w.kh), w.KVH, w.kv_runs, w.KVHl, dk, stats_);
  heads_to_sequence(ops, comm_, w, sent(w.dvh, w.vh), w.KVH, w.kv_runs, w.KVHl, dv, stats_);
  stats_.comm_seconds += since(t0);
}

}  // namespace trlhpc
