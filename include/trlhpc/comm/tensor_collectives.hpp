#pragma once
// Collectives on Tensors of either activation dtype (F32, or BF16 bits under --bf16): the typed
// Communicator call for the tensor's dtype, so code moving activations (ring attention's K/V hops,
// Ulysses' all-to-alls) works for both without a branch at each call. Host C++20 code only.
#include <cstdint>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

// send_recv_async of all of `send` to `dest` while receiving all of `recv` from `source`.
[[nodiscard]] inline CommRequest send_recv_tensor_async(Communicator& comm, const Tensor& send, int dest,
                                                        const Tensor& recv, int source) {
  TRLHPC_ASSERT(send.dtype() == recv.dtype(), "send_recv_tensor_async: send and recv dtypes differ");
  if (send.dtype() == DType::BF16)
    return comm.send_recv_async(span_of<const uint16_t>(send), dest, span_of<uint16_t>(recv), source);
  return comm.send_recv_async(span_of<const float>(send), dest, span_of<float>(recv), source);
}

// all_to_all of the first n elements of `in` into the first n of `out` (same dtype).
inline void all_to_all_tensor(Communicator& comm, const Tensor& in, const Tensor& out, int64_t n) {
  TRLHPC_ASSERT(in.dtype() == out.dtype(), "all_to_all_tensor: in and out dtypes differ");
  if (in.dtype() == DType::BF16) comm.all_to_all(span_of<const uint16_t>(in, n), span_of<uint16_t>(out, n));
  else comm.all_to_all(span_of<const float>(in, n), span_of<float>(out, n));
}

}  // namespace trlhpc
