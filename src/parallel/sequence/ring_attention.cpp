// Ring attention over the cp group: forward with log-sum-exp merging, backward with travelling dK/dV
// accumulators. The algorithm, its sources and the lse layout are in include/trlhpc/parallel/sequence/ring_attention.hpp;
// which chunk pairs are computed is in ring_attention_blocks.hpp.
//
// Buffers, for the local shapes B, Tl = 2 Tc, KVH, HS (all from the Ops, so device memory on a GPU):
//   kv[2]      (2, B, Tl, KVH, HS)  K then V of the block held now / arriving next
//   meta[2]    (2, B, Tl) I32       its positions then doc ids
//   dkv_*      (2, B, Tl, KVH, HS)  dK then dV: this step's contribution, the sum being sent, the sum received
//   o_blk      (1, Tc, NH, HS), lse_blk (1, NH, Tc): one block's result before it is merged
//   o_acc      (B, Tl, NH, HS) F32: the running output when o is BF16 (--bf16), cast into o once at the
//              end, so merging P blocks rounds once as the 1-process kernel does (empty when o is F32);
//              in the backward the running dq, for the same reason (docs/CUDA-REVIEW-FIXES.md defect 1)
// K/V travel in their own dtype (BF16 under --bf16: half the bytes, and exact, since they are stored
// so); o_blk, lse and the dK/dV accumulators are F32.
// Each message is one send_recv_async to rank r+1 with the receive from r-1; every rank issues them in
// the same order, so MPI's non-overtaking rule pairs them even though they share a tag.
#include "trlhpc/parallel/sequence/ring_attention.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "src/parallel/sequence/ring_attention_blocks.hpp"
#include "trlhpc/core/allocation_counter.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/comm/tensor_collectives.hpp"

namespace trlhpc {

struct RingAttention::Workspace {
  int64_t B = 0, Tl = 0, NH = 0, KVH = 0, HS = 0;
  DType kv_dtype = DType::F32, o_dtype = DType::F32;
  Tensor kv[2];    // (2, B, Tl, KVH, HS) each
  Tensor meta[2];  // (2, B, Tl) I32 each
  Tensor dkv_block, dkv_send, dkv_recv;  // (2, B, Tl, KVH, HS) each
  Tensor o_blk;    // (1, Tc, NH, HS)
  Tensor lse_blk;  // (1, NH, Tc)
  Tensor o_acc;    // (B, Tl, NH, HS) F32, only when o is not F32
  std::vector<int32_t> host_meta;  // (2, B, Tl) positions then doc ids, host copy for planning

  int64_t Tc() const { return Tl / 2; }
  int64_t kv_numel() const { return B * Tl * KVH * HS; }  // one of K or V
  bool fits(const AttentionShape& s, DType kv_type, DType o_type) const {
    return B == s.B && Tl == s.Tq && NH == s.NH && KVH == s.KVH && HS == s.HS && kv_dtype == kv_type &&
           o_dtype == o_type;
  }
  int64_t bytes() const {
    int64_t n = 0;
    for (const Tensor* t : {&kv[0], &kv[1], &meta[0], &meta[1], &dkv_block, &dkv_send, &dkv_recv, &o_blk, &lse_blk,
                          &o_acc})
      n += t->data() ? static_cast<int64_t>(t->nbytes()) : 0;
    return n;
  }

  // Views for one primitive call. `which` 0 = K (positions), 1 = V (doc ids).
  Tensor kv_view(const Tensor& buffer, int which, int64_t b, int64_t first, int64_t count) const {
    return buffer.view({1, count * Tc(), KVH, HS}, which * kv_numel() + (b * Tl + first * Tc()) * KVH * HS);
  }
  Tensor meta_view(const Tensor& buffer, int which, int64_t b, int64_t first, int64_t count) const {
    return buffer.view({1, count * Tc()}, which * B * Tl + b * Tl + first * Tc());
  }
  // Chunk c of row b of a (B, Tl, H, HS) tensor, of its (B, Tl) positions / doc ids, of the lse.
  Tensor chunk(const Tensor& x, int64_t H, int64_t b, int64_t c) const {
    return x.view({1, Tc(), H, HS}, (b * Tl + c * Tc()) * H * HS);
  }
  Tensor chunk_ids(const Tensor& ids, int64_t b, int64_t c) const { return ids.view({1, Tc()}, b * Tl + c * Tc()); }
  Tensor chunk_lse(const Tensor& lse, int64_t b, int64_t c) const {
    return lse.view({1, NH, Tc()}, (b * 2 + c) * NH * Tc());
  }
};

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The K/V (+ metadata) hop of one ring step.
struct BlockTransfer {
  CommRequest kv, meta;
  int64_t bytes = 0;  // sent by this hop
  void progress() {
    kv.test();
    meta.test();
  }
  // Bytes of this hop already complete (called when the overlapping compute ends).
  int64_t bytes_done() { return kv.test() && meta.test() ? bytes : 0; }
  void wait() {
    kv.wait();
    meta.wait();
  }
};

}  // namespace

RingAttention::RingAttention(Communicator& cp) : comm_(cp) {}
RingAttention::~RingAttention() = default;

int64_t RingAttention::workspace_bytes() const { return ws_ ? ws_->bytes() : 0; }

namespace {

// Every buffer of a workspace for local shape s, each from alloc(shape, dtype). One routine for the
// real buffers (Ops::allocate) and the memory plan (a byte counter), so the two cannot drift apart.
template <class Alloc>
void allocate_ring_buffers(RingAttention::Workspace& w, const AttentionShape& s, DType kv_dtype, DType o_dtype,
                           Alloc&& alloc) {
  w.B = s.B, w.Tl = s.Tq, w.NH = s.NH, w.KVH = s.KVH, w.HS = s.HS;
  w.kv_dtype = kv_dtype, w.o_dtype = o_dtype;
  for (int i = 0; i < 2; ++i) {
    w.kv[i] = alloc(Shape{2 * w.kv_numel()}, kv_dtype);
    w.meta[i] = alloc(Shape{2 * w.B * w.Tl}, DType::I32);
  }
  w.dkv_block = alloc(Shape{2 * w.kv_numel()}, DType::F32);
  w.dkv_send = alloc(Shape{2 * w.kv_numel()}, DType::F32);
  w.dkv_recv = alloc(Shape{2 * w.kv_numel()}, DType::F32);
  w.o_blk = alloc(Shape{1, w.Tc(), w.NH, w.HS}, DType::F32);
  w.lse_blk = alloc(Shape{1, w.NH, w.Tc()}, DType::F32);
  if (o_dtype != DType::F32) w.o_acc = alloc(Shape{w.B, w.Tl, w.NH, w.HS}, DType::F32);
}

}  // namespace

RingAttention::Workspace& RingAttention::workspace(Ops& ops, const AttentionShape& s, DType kv_dtype, DType o_dtype) {
  TRLHPC_ASSERT(s.Tq == s.Tk && s.Tq % 2 == 0,
                "ring attention needs the two zigzag chunks of equal length: local T " + std::to_string(s.Tq) +
                    " (shard the batch with shard_sequence)");
  if (ws_ && ws_->fits(s, kv_dtype, o_dtype)) return *ws_;
  ws_ = std::make_unique<Workspace>();
  Workspace& w = *ws_;
  allocate_ring_buffers(w, s, kv_dtype, o_dtype, [&ops](const Shape& shape, DType dtype) { return ops.allocate(shape, dtype); });
  w.host_meta.resize(static_cast<size_t>(2 * w.B * w.Tl));
  return w;
}

int64_t RingAttention::planned_workspace_bytes(const AttentionShape& s, DType kv_dtype, DType o_dtype) {
  Workspace w;
  AllocationCounter counter;
  allocate_ring_buffers(w, s, kv_dtype, o_dtype, counter);
  return counter.bytes;
}

namespace {

// This rank's own K/V and metadata into the first ring buffer.
void load_local_block(Ops& ops, RingAttention::Workspace& w, const Tensor& k, const Tensor& v, const Tensor& pos,
                      const Tensor& doc) {
  ops.copy(w.kv[0].view({w.kv_numel()}, 0), k.view({w.kv_numel()}));
  ops.copy(w.kv[0].view({w.kv_numel()}, w.kv_numel()), v.view({w.kv_numel()}));
  ops.copy(w.meta[0].view({w.B * w.Tl}, 0), pos.view({w.B * w.Tl}));
  ops.copy(w.meta[0].view({w.B * w.Tl}, w.B * w.Tl), doc.view({w.B * w.Tl}));
}

// Chunk summaries of a (2, B, Tl) metadata buffer.
std::vector<ring::ChunkSummary> summarize(Ops& ops, RingAttention::Workspace& w, const Tensor& meta) {
  ops.copy_to_host(w.host_meta.data(), meta, w.host_meta.size() * sizeof(int32_t));
  return ring::summarize_chunks(w.host_meta.data(), w.host_meta.data() + w.B * w.Tl, w.B, w.Tl);
}

// Sends the block held in buffer `cur` to rank `next` while receiving the one of rank `prev` into the
// other buffer.
BlockTransfer pass_block(Communicator& comm, RingAttention::Workspace& w, int cur, int next, int prev,
                         RingAttentionStats& stats) {
  BlockTransfer t;
  t.kv = send_recv_tensor_async(comm, w.kv[cur], next, w.kv[cur ^ 1], prev);
  t.meta = comm.send_recv_async(span_of<int32_t>(w.meta[cur]), next, span_of<int32_t>(w.meta[cur ^ 1]), prev);
  t.bytes = static_cast<int64_t>(w.kv[cur].nbytes() + w.meta[cur].nbytes());
  stats.transfers += 2;
  stats.bytes_sent += t.bytes;
  return t;
}

}  // namespace

void RingAttention::forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos,
                            const Tensor& doc, const Tensor& o_out, const Tensor& lse, const AttentionShape& s) {
  Workspace& w = workspace(ops, s, k.dtype(), o_out.dtype());
  const Tensor o = w.o_acc.data() ? w.o_acc : o_out;  // where the blocks merge (F32)
  const int P = comm_.size(), next = (comm_.rank() + 1) % P, prev = (comm_.rank() + P - 1) % P;
  ++stats_.forward_calls;
  load_local_block(ops, w, k, v, pos, doc);
  const std::vector<ring::ChunkSummary> q_summary = summarize(ops, w, w.meta[0]);
  int cur = 0;
  for (int step = 0; step < P; ++step) {
    // The block of step + 1 travels while this one computes.
    BlockTransfer transfer = step + 1 < P ? pass_block(comm_, w, cur, next, prev, stats_) : BlockTransfer{};
    const auto t0 = Clock::now();
    // Step 0 is the local block: it writes o and lse of every query chunk in place; later blocks merge.
    const ring::BlockPlan plan =
        ring::plan_block(q_summary, step == 0 ? q_summary : summarize(ops, w, w.meta[cur]), w.B, step == 0, s.window);
    stats_.chunk_pairs += plan.pairs;
    stats_.chunk_pairs_skipped += plan.pairs_skipped;
    for (const ring::BlockItem& it : plan.items) {
      AttentionShape sub = s;
      sub.B = 1, sub.Tq = w.Tc(), sub.Tk = it.k_count * w.Tc();
      const Tensor qv = w.chunk(q, s.NH, it.row, it.q_chunk);
      const Tensor kv = w.kv_view(w.kv[cur], 0, it.row, it.k_first, it.k_count);
      const Tensor vv = w.kv_view(w.kv[cur], 1, it.row, it.k_first, it.k_count);
      const Tensor q_pos = w.chunk_ids(pos, it.row, it.q_chunk), q_doc = w.chunk_ids(doc, it.row, it.q_chunk);
      const Tensor k_pos = w.meta_view(w.meta[cur], 0, it.row, it.k_first, it.k_count);
      const Tensor k_doc = w.meta_view(w.meta[cur], 1, it.row, it.k_first, it.k_count);
      const Tensor o_acc = w.chunk(o, s.NH, it.row, it.q_chunk), lse_acc = w.chunk_lse(lse, it.row, it.q_chunk);
      if (step == 0) {
        ops.attention_fwd(qv, kv, vv, q_pos, k_pos, q_doc, k_doc, o_acc, lse_acc, sub);
      } else {
        ops.attention_fwd(qv, kv, vv, q_pos, k_pos, q_doc, k_doc, w.o_blk, w.lse_blk, sub);
        ops.attention_merge(o_acc, lse_acc, w.o_blk, w.lse_blk, sub);
      }
      transfer.progress();  // MPI moves rendezvous messages only inside MPI calls
    }
    stats_.compute_seconds += since(t0);
    stats_.bytes_hidden += transfer.bytes_done();
    const auto t1 = Clock::now();
    transfer.wait();
    stats_.wait_seconds += since(t1);
    cur ^= 1;
  }
  if (o.data() != o_out.data()) ops.cast(o_out, o);
}

void RingAttention::backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                             const Tensor& lse, const Tensor& dout, const Tensor& pos, const Tensor& doc,
                             const Tensor& dq, const Tensor& dk, const Tensor& dv, const AttentionShape& s) {
  Workspace& w = workspace(ops, s, k.dtype(), o.dtype());
  const int P = comm_.size(), next = (comm_.rank() + 1) % P, prev = (comm_.rank() + P - 1) % P;
  ++stats_.backward_calls;
  const Tensor dq_acc = w.o_acc.data() ? w.o_acc : dq;  // where dq accumulates over the steps (F32)
  ops.fill_zero(dq_acc);
  load_local_block(ops, w, k, v, pos, doc);
  const std::vector<ring::ChunkSummary> q_summary = summarize(ops, w, w.meta[0]);
  CommRequest dkv_request;  // the accumulator sent after the previous step
  int cur = 0;
  for (int step = 0; step < P; ++step) {
    BlockTransfer transfer = step + 1 < P ? pass_block(comm_, w, cur, next, prev, stats_) : BlockTransfer{};
    const auto t0 = Clock::now();
    const ring::BlockPlan plan =
        ring::plan_block(q_summary, step == 0 ? q_summary : summarize(ops, w, w.meta[cur]), w.B, false, s.window);
    stats_.chunk_pairs += plan.pairs;
    stats_.chunk_pairs_skipped += plan.pairs_skipped;
    ops.fill_zero(w.dkv_block);
    for (const ring::BlockItem& it : plan.items) {
      AttentionShape sub = s;
      sub.B = 1, sub.Tq = w.Tc(), sub.Tk = it.k_count * w.Tc();
      ops.attention_bwd(w.chunk(q, s.NH, it.row, it.q_chunk), w.kv_view(w.kv[cur], 0, it.row, it.k_first, it.k_count),
                        w.kv_view(w.kv[cur], 1, it.row, it.k_first, it.k_count), w.chunk(o, s.NH, it.row, it.q_chunk),
                        w.chunk_lse(lse, it.row, it.q_chunk), w.chunk(dout, s.NH, it.row, it.q_chunk),
                        w.chunk_ids(pos, it.row, it.q_chunk), w.meta_view(w.meta[cur], 0, it.row, it.k_first, it.k_count),
                        w.chunk_ids(doc, it.row, it.q_chunk), w.meta_view(w.meta[cur], 1, it.row, it.k_first, it.k_count),
                        w.chunk(dq_acc, s.NH, it.row, it.q_chunk),
                        w.kv_view(w.dkv_block, 0, it.row, it.k_first, it.k_count),
                        w.kv_view(w.dkv_block, 1, it.row, it.k_first, it.k_count), sub);
      transfer.progress();
      dkv_request.test();
    }
    stats_.compute_seconds += since(t0);
    stats_.bytes_hidden += transfer.bytes_done();
    if (step > 0 && dkv_request.test()) stats_.bytes_hidden += static_cast<int64_t>(w.dkv_recv.nbytes());
    if (step > 0) {  // add what the block's earlier visits accumulated (arrived from rank r-1)
      const auto t1 = Clock::now();
      dkv_request.wait();
      stats_.wait_seconds += since(t1);
      const auto t2 = Clock::now();
      ops.add_inplace(w.dkv_block, w.dkv_recv);
      stats_.compute_seconds += since(t2);
    }
    // Pass the sum on (after the last step this hop brings every accumulator home). The old send
    // buffer is free: its request completed in the wait above.
    std::swap(w.dkv_block, w.dkv_send);
    dkv_request = comm_.send_recv_async(span_of<float>(w.dkv_send), next, span_of<float>(w.dkv_recv), prev);
    stats_.transfers += 1;
    stats_.bytes_sent += static_cast<int64_t>(w.dkv_send.nbytes());
    const auto t3 = Clock::now();
    transfer.wait();
    stats_.wait_seconds += since(t3);
    cur ^= 1;
  }
  const auto t4 = Clock::now();
  dkv_request.wait();
  stats_.wait_seconds += since(t4);
  if (dq_acc.data() != dq.data()) ops.cast(dq, dq_acc);
  ops.cast(dk.view({w.kv_numel()}), w.dkv_recv.view({w.kv_numel()}, 0));
  ops.cast(dv.view({w.kv_numel()}), w.dkv_recv.view({w.kv_numel()}, w.kv_numel()));
}

}  // namespace trlhpc
