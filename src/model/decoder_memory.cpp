// Decoder::activation_bytes: what the decoder's own buffers hold for the current micro-batch shape.
#include "src/model/decoder_internal.hpp"

namespace trlhpc {
namespace {

// Buffers never allocated (e.g. the recompute set without checkpointing) are default Tensors.
int64_t bytes_of(const Tensor& t) { return t.data() ? static_cast<int64_t>(t.nbytes()) : 0; }

int64_t layer_bytes(const Decoder::LayerActivations& a) {
  int64_t n = 0;
  for (const Tensor* t : {&a.x_in, &a.h1, &a.rstd1, &a.q, &a.k, &a.v, &a.attn, &a.lse, &a.x_mid, &a.h2, &a.rstd2,
                          &a.gate, &a.up, &a.act})
    n += bytes_of(*t);
  return n;
}

}  // namespace

int64_t Decoder::activation_bytes() const {
  int64_t n = 0;
  for (const LayerActivations& a : acts_) n += layer_bytes(a);
  const Scratch& s = *scratch_;
  for (const Tensor* t : {&s.x_final, &s.h_final, &s.rstd_final, &s.dx, &s.dh, &s.dtmp, &s.dq, &s.dk, &s.dv, &s.dattn,
                          &s.dact, &s.dgate, &s.dup, &s.x_recompute_out, &s.h_full, &s.dx_full, &s.row_out})
    n += bytes_of(*t);
  // Without tp sequence parallel these alias h_final / dh.
  if (s.h_final_local.data() != s.h_final.data()) n += bytes_of(s.h_final_local);
  if (s.dh_local.data() != s.dh.data()) n += bytes_of(s.dh_local);
  return n + layer_bytes(s.recompute);
}

}  // namespace trlhpc
