// Decoder::activation_bytes: what the decoder's own buffers hold for the current micro-batch shape;
// Decoder::planned_activation_bytes: the same without a decoder, by counting what the allocation asks for.
#include <set>
#include <vector>

#include "src/model/decoder_internal.hpp"
#include "trlhpc/core/allocation_counter.hpp"

namespace trlhpc {
namespace {

// Buffers never allocated (e.g. the recompute set without checkpointing) are default Tensors.
int64_t bytes_of(const Tensor& t) { return t.data() ? static_cast<int64_t>(t.nbytes()) : 0; }

int64_t layer_bytes(const Decoder::LayerActivations& a) {
  int64_t n = 0;
  for (const Tensor* t : {&a.x_in, &a.h1, &a.rstd1, &a.q, &a.k, &a.v, &a.attn, &a.lse, &a.x_mid, &a.h2, &a.rstd2,
                          &a.gate, &a.up, &a.act, &a.q_pre, &a.k_pre, &a.q_rstd, &a.k_rstd, &a.attn_out, &a.rstd_attn_out,
                          &a.mlp_out, &a.rstd_mlp_out})
    n += bytes_of(*t);
  return n;
}

}  // namespace

int64_t Decoder::activation_bytes() const {
  int64_t n = 0;
  for (const LayerActivations& a : acts_) n += layer_bytes(a);
  const Scratch& s = *scratch_;
  // Some scratch names share one buffer (h_final_local / dh_local without tp sequence parallel;
  // h_full / dx_full / row_out with it): count each buffer once.
  std::set<const void*> counted;
  for (const Tensor* t : {&s.x_final, &s.h_final, &s.h_final_local, &s.rstd_final, &s.dx, &s.dx_compute, &s.dh, &s.dh_local, &s.dtmp, &s.dbranch,
                          &s.h_full, &s.dx_full, &s.row_out, &s.dq, &s.dk, &s.dv, &s.dq_pre, &s.dk_pre, &s.dattn,
                          &s.dact, &s.dgate, &s.dup, &s.x_recompute_out})
    if (counted.insert(t->data()).second) n += bytes_of(*t);
  return n + layer_bytes(s.recompute);
}

int64_t Decoder::planned_activation_bytes(const ModelConfig& local_config, int64_t N, int64_t Nl, bool checkpointing,
                                          DType compute) {
  // Each allocation request counted and answered with an empty tensor: the aliases (h_final_local =
  // h_final without tp sequence parallel, ...) are assignments, not requests, so each buffer counts once.
  struct ByteCounter final : BufferSource {
    Tensor allocate(const Shape& shape, DType dtype) override { return count(shape, dtype); }
    AllocationCounter count;
  } counter;
  std::vector<LayerActivations> acts(static_cast<size_t>(local_config.num_hidden_layers));
  Scratch scratch;
  allocate_decoder_buffers(counter, compute, local_config, N, Nl, checkpointing, acts, scratch);
  return counter.count.bytes;
}

}  // namespace trlhpc
