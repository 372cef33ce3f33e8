// The CUDA implementation of Ops, part 2: casts, and the fused AdamW that may write the --bf16 compute
// copy of the parameters in the same pass (design: include/trlhpc/ops/cuda_ops.hpp, "Mixed precision").
#include <algorithm>
#include <string>

#include "adamw.cuh"
#include "casts.cuh"
#include "cuda_ops_impl.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda_backend {

void CudaOpsImpl::cast(const Tensor& dst, const Tensor& src) {
  expect_numel(dst, src.numel(), "cast");
  expect_cuda(dst, "cast dst");
  expect_cuda(src, "cast src");
  if (dst.dtype() == src.dtype()) return copy(dst, src);
  const auto timing = timed("cast");
  if (dst.dtype() == DType::BF16 && src.dtype() == DType::F32)
    cuda::cast(data_of<bf16>(dst), data_of<float>(src), src.numel(), stream());
  else if (dst.dtype() == DType::F32 && src.dtype() == DType::BF16)
    cuda::cast(data_of<float>(dst), data_of<bf16>(src), src.numel(), stream());
  else
    TRLHPC_ASSERT(false, std::string("cast: unsupported ") + dtype_name(src.dtype()) + " -> " + dtype_name(dst.dtype()));
}

void CudaOpsImpl::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                             const AdamWHyper& h, const Tensor& compute) {
  adamw_step_many({AdamWSegment{param, grad, m, v, h, compute}});
}

void CudaOpsImpl::adamw_step_many(const std::vector<AdamWSegment>& segments) {
  std::vector<cuda::AdamWTask> tasks;
  tasks.reserve(segments.size());
  for (const AdamWSegment& s : segments) {
    for (const Tensor* t : {&s.param, &s.grad, &s.m, &s.v}) {
      expect_dtype(*t, DType::F32, "adamw_step");
      expect_numel(*t, s.param.numel(), "adamw_step");
      expect_cuda(*t, "adamw_step");
    }
    const AdamWHyper& h = s.hyper;
    bf16* copy = nullptr;
    if (s.compute.data()) {
      expect_dtype(s.compute, DType::BF16, "adamw_step compute copy");
      expect_numel(s.compute, s.param.numel(), "adamw_step compute copy");
      expect_cuda(s.compute, "adamw_step compute copy");
      copy = data_of<bf16>(s.compute);
    }
    tasks.push_back(cuda::AdamWTask{data_of<float>(s.param), data_of<float>(s.grad), data_of<float>(s.m),
                                    data_of<float>(s.v), copy, s.param.numel(),
                                    math::adamw_scalars(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step)});
  }
  const auto timing = timed("adamw");
  cuda::adamw_step(tasks, stream());
}

}  // namespace trlhpc::cuda_backend
