// CudaOpsImpl's choice between cuDNN's fused attention and the hand-written kernel for one call
// (the logic: include/trlhpc/kernels/attention_route.hpp; the cuDNN side: kernels/cuda/cudnn_attention.hpp).
// attention_fwd/bwd (cuda_ops_layers.cu) ask try_cudnn_attention_* first and run the kernel when it
// returns false.
//
// Reading the mask: whether cuDNN can express a call's mask depends on the position/document ids, which
// are on the device. The cuDNN route therefore copies q_pos/q_doc (8 bytes a token) to the host and
// waits for them: one stream synchronisation per attention call. That cost is part of what the GPU run
// measures against the kernel (--cuda_attention cudnn vs kernel); under `auto` (the kernel until
// measured) and `kernel` nothing is copied and nothing waits.
#include <vector>

#include "cuda_ops_impl.cuh"
#include "cudnn_attention.hpp"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/kernels/attention_route.hpp"

namespace trlhpc::cuda_backend {

namespace {

kernels::AttentionCallFacts call_facts(const Tensor& q, const Tensor& q_pos, const Tensor& k_pos, const Tensor& q_doc,
                                       const Tensor& k_doc, const AttentionShape& s) {
  kernels::AttentionCallFacts f;
  f.bf16_inputs = q.dtype() == DType::BF16;
  f.same_mask_ids = s.Tq == s.Tk && q_pos.data() == k_pos.data() && q_doc.data() == k_doc.data();
  f.head_size = s.HS;
  f.window = s.window;
  // Gemma 2's score soft-capping is not expressed for cuDNN: those calls keep the hand-written kernel.
  f.softcap = s.softcap != 0;
  f.cudnn_built = cuda::CudnnAttention::built();
  f.cudnn_usable = f.cudnn_built && cuda::CudnnAttention::usable();
  return f;
}

cuda::CudnnAttentionDims cudnn_dims(const AttentionShape& s) {
  return cuda::CudnnAttentionDims{s.B, s.Tq, static_cast<int>(s.NH), static_cast<int>(s.KVH), static_cast<int>(s.HS),
                                  s.scale, s.window};
}

}  // namespace

std::optional<kernels::PackedSequences> CudaOpsImpl::cudnn_attention_layout(const Tensor& q, const Tensor& q_pos,
                                                                            const Tensor& k_pos, const Tensor& q_doc,
                                                                            const Tensor& k_doc,
                                                                            const AttentionShape& s) {
  const kernels::AttentionRoute route =
      kernels::choose_attention(options_.attention, call_facts(q, q_pos, k_pos, q_doc, k_doc, s));
  if (!route.cudnn) return std::nullopt;
  const int64_t n = s.B * s.Tq;
  std::vector<int32_t> ids(static_cast<size_t>(2 * n));
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(ids.data(), q_pos.data(), n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream()));
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(ids.data() + n, q_doc.data(), n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream()));
  stream_.synchronize();
  std::optional<kernels::PackedSequences> seq = kernels::packed_sequences(ids.data(), ids.data() + n, s.B, s.Tq);
  if (seq && !cudnn_attention_) cudnn_attention_ = std::make_unique<cuda::CudnnAttention>();
  return seq;
}

bool CudaOpsImpl::try_cudnn_attention_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
                                          const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc,
                                          const Tensor& o, const Tensor& lse, const AttentionShape& s) {
  const auto seq = cudnn_attention_layout(q, q_pos, k_pos, q_doc, k_doc, s);
  if (!seq) return false;
  const auto* qb = data_of<bf16>(q);
  if (o.dtype() == DType::BF16)
    return cudnn_attention_->forward(qb, data_of<bf16>(k), data_of<bf16>(v), data_of<bf16>(o), data_of<float>(lse),
                                     *seq, cudnn_dims(s), *allocator_, stream());
  return cudnn_attention_->forward(qb, data_of<bf16>(k), data_of<bf16>(v), data_of<float>(o), data_of<float>(lse),
                                   *seq, cudnn_dims(s), *allocator_, stream());
}

bool CudaOpsImpl::try_cudnn_attention_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                          const Tensor& lse, const Tensor& dout, const Tensor& q_pos,
                                          const Tensor& k_pos, const Tensor& q_doc, const Tensor& k_doc,
                                          const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                          const AttentionShape& s) {
  // cuDNN reads o in the inputs' dtype; an F32 o (a ring accumulator) only occurs on the ring path,
  // whose blocks are not self-attention, but keep the kernel for it regardless.
  if (o.dtype() != q.dtype()) return false;
  const auto seq = cudnn_attention_layout(q, q_pos, k_pos, q_doc, k_doc, s);
  if (!seq) return false;
  const auto args = [&](auto* g) {
    using G = std::remove_pointer_t<decltype(g)>;
    return cudnn_attention_->backward(data_of<bf16>(q), data_of<bf16>(k), data_of<bf16>(v), data_of<bf16>(o),
                                      data_of<float>(lse), data_of<bf16>(dout), data_of<G>(dq), data_of<G>(dk),
                                      data_of<G>(dv), *seq, cudnn_dims(s), *allocator_, stream());
  };
  if (dq.dtype() == DType::BF16) return args(static_cast<bf16*>(nullptr));
  return args(static_cast<float*>(nullptr));
}

}  // namespace trlhpc::cuda_backend
