// The CUDA implementation of Ops, part 2: casts, the bf16 compute weights of mixed precision, and the
// fused AdamW that keeps them fresh (design: include/trlhpc/ops/cuda_ops.hpp, "Mixed precision").
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

Tensor CudaOpsImpl::compute_weight(const Tensor& master) {
  if (compute_dtype() == DType::F32) return master;
  expect_dtype(master, DType::F32, "compute_weight");
  expect_cuda(master, "compute_weight");
  const float* key = data_of<float>(master);
  auto it = shadows_.find(key);
  if (it == shadows_.end() || it->second.master.numel() != master.numel()) {
    if (it != shadows_.end()) shadows_.erase(it);
    Shadow s{master.reshape({master.numel()}), allocate({master.numel()}, DType::BF16)};
    cast(s.copy, s.master);
    it = shadows_.emplace(key, std::move(s)).first;
  }
  return it->second.copy.reshape(master.shape());
}

void CudaOpsImpl::refresh_compute_weights() {
  for (auto& [key, s] : shadows_) cast(s.copy, s.master);
}

bf16* CudaOpsImpl::shadow_inside(const float* p, int64_t n) {
  auto it = shadows_.upper_bound(p);
  if (it == shadows_.begin()) return nullptr;
  --it;
  const float* m = it->first;
  if (p + n > m + it->second.master.numel()) return nullptr;
  return data_of<bf16>(it->second.copy) + (p - m);
}

void CudaOpsImpl::recast_overlapping_shadows(const float* p, int64_t n) {
  auto it = shadows_.upper_bound(p);
  if (it != shadows_.begin()) --it;
  for (; it != shadows_.end() && it->first < p + n; ++it) {
    const float* m = it->first;
    const float* lo = std::max(p, m);
    const float* hi = std::min(p + n, m + it->second.master.numel());
    if (lo >= hi) continue;
    cuda::cast(data_of<bf16>(it->second.copy) + (lo - m), lo, hi - lo, stream());
  }
}

void CudaOpsImpl::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                             const AdamWHyper& h) {
  adamw_step_many({AdamWSegment{param, grad, m, v, h}});
}

void CudaOpsImpl::adamw_step_many(const std::vector<AdamWSegment>& segments) {
  std::vector<cuda::AdamWTask> tasks;
  std::vector<std::pair<const float*, int64_t>> recast;  // ranges whose shadows need a separate cast
  tasks.reserve(segments.size());
  for (const AdamWSegment& s : segments) {
    for (const Tensor* t : {&s.param, &s.grad, &s.m, &s.v}) {
      expect_dtype(*t, DType::F32, "adamw_step");
      expect_numel(*t, s.param.numel(), "adamw_step");
      expect_cuda(*t, "adamw_step");
    }
    const AdamWHyper& h = s.hyper;
    const float* p = data_of<float>(s.param);
    bf16* shadow = shadows_.empty() ? nullptr : shadow_inside(p, s.param.numel());
    if (!shadow && !shadows_.empty()) recast.emplace_back(p, s.param.numel());
    tasks.push_back(cuda::AdamWTask{data_of<float>(s.param), data_of<float>(s.grad), data_of<float>(s.m),
                                    data_of<float>(s.v), shadow, s.param.numel(),
                                    math::adamw_scalars(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step)});
  }
  const auto timing = timed("adamw");
  cuda::adamw_step(tasks, stream());
  for (const auto& [p, n] : recast) recast_overlapping_shadows(p, n);
}

}  // namespace trlhpc::cuda_backend
