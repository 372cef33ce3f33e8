#pragma once
// OpTimer: GPU time per op name from cudaEvent pairs recorded on the backend's stream (benchmarks,
// CudaOpsOptions::time_ops). Recording is asynchronous; totals() waits for the recorded events. Events
// are recycled, and at most kMaxPending pairs wait at a time (older ones are folded in, which
// synchronises, so a long run without totals() stays bounded). Disabled timers cost one branch per op.
// A scope owns its pair of events until it closes and only then joins the pending list, so scopes may
// nest and a fold inside one cannot pull its events away (docs/CUDA-REVIEW-FIXES.md defect 9: a scope held an
// index into the pending list, which the fold invalidated).
#include <cuda_runtime.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuda_raii.cuh"
#include "trlhpc/ops/cuda_ops.hpp"

namespace trlhpc::cuda {

class OpTimer {
 public:
  explicit OpTimer(bool enabled) : enabled_(enabled) {}

  // Records a start event now and an end event when the scope closes.
  class Scope {
   public:
    Scope(OpTimer* timer, const char* name, cudaStream_t stream);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpTimer* timer_;
    cudaStream_t stream_;
    const char* name_;
    std::optional<CudaEvent> start_, end_;  // recorded at construction / at close; none when disabled
  };
  Scope scope(const char* name, cudaStream_t stream) { return Scope(enabled_ ? this : nullptr, name, stream); }

  // Summed time per op since the last reset, longest first (synchronises on the recorded events).
  std::vector<OpTiming> totals();
  void reset();

 private:
  static constexpr size_t kMaxPending = 8192;
  struct Pending {
    const char* name;
    CudaEvent start, end;
  };
  void fold_pending();
  CudaEvent take_event();

  bool enabled_;
  std::vector<Pending> pending_;
  std::vector<CudaEvent> spare_;  // recycled timing events
  std::map<std::string, OpTiming> totals_;
};

}  // namespace trlhpc::cuda
