#pragma once
// SequenceAttention: how a decoder layer's attention sees the sequence (ARCHITECTURE.md "Sequence
// parallel"). The decoder hands over this rank's tokens; the implementation decides where the rest of
// the sequence comes from:
//   LocalAttention   the whole sequence is on this rank: one call of the attention primitive;
//   ring (cp)        K/V blocks travel around the cp group, merged by log-sum-exp;
//   Ulysses (sp)     all-to-all from sequence-sharded to head-sharded and back.
// Shapes are of this rank's tokens: q (B, T, NH, HS), k/v (B, T, KVH, HS), positions/doc ids (B, T),
// o (B, T, NH, HS), lse: B*NH*T floats of storage the implementation may lay out as it needs (it gets
// the same buffer back in backward). dq/dk/dv are overwritten (not accumulated).
#include "trlhpc/core/tensor.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

class SequenceAttention {
 public:
  virtual ~SequenceAttention() = default;
  virtual void forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos,
                       const Tensor& doc, const Tensor& o, const Tensor& lse, const AttentionShape& s) = 0;
  virtual void backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout, const Tensor& pos, const Tensor& doc, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv, const AttentionShape& s) = 0;
  // Bytes of communication buffers currently allocated (0 for LocalAttention), for memory reports.
  virtual int64_t workspace_bytes() const { return 0; }
};

// The whole sequence on this rank (cp = sp = 1).
class LocalAttention final : public SequenceAttention {
 public:
  void forward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos, const Tensor& doc,
               const Tensor& o, const Tensor& lse, const AttentionShape& s) override {
    ops.attention_fwd(q, k, v, pos, pos, doc, doc, o, lse, s);
  }
  void backward(Ops& ops, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                const Tensor& dout, const Tensor& pos, const Tensor& doc, const Tensor& dq, const Tensor& dk,
                const Tensor& dv, const AttentionShape& s) override {
    ops.fill_zero(dq);
    ops.fill_zero(dk);
    ops.fill_zero(dv);
    ops.attention_bwd(q, k, v, o, lse, dout, pos, pos, doc, doc, dq, dk, dv, s);
  }
};

}  // namespace trlhpc
