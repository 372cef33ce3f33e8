// OpTimer (see op_timer.cuh).
#include <algorithm>

#include "op_timer.cuh"

namespace trlhpc::cuda {

OpTimer::Scope::Scope(OpTimer* timer, const char* name, cudaStream_t stream) : timer_(timer), stream_(stream) {
  if (!timer_) return;
  if (timer_->pending_.size() >= kMaxPending) timer_->fold_pending();
  auto take = [&]() {
    if (timer_->spare_.empty()) return CudaEvent(true);
    CudaEvent e = std::move(timer_->spare_.back());
    timer_->spare_.pop_back();
    return e;
  };
  CudaEvent start = take(), end = take();
  start.record(stream_);
  index_ = timer_->pending_.size();
  timer_->pending_.push_back(Pending{name, std::move(start), std::move(end)});
}

OpTimer::Scope::~Scope() {
  if (timer_) cudaEventRecord(timer_->pending_[index_].end.get(), stream_);  // no throw from a destructor
}

void OpTimer::fold_pending() {
  for (Pending& p : pending_) {
    TRLHPC_CHECK_CUDA(cudaEventSynchronize(p.end.get()));
    OpTiming& t = totals_[p.name];
    t.name = p.name;
    ++t.calls;
    t.milliseconds += p.end.elapsed_ms_since(p.start);
    spare_.push_back(std::move(p.start));
    spare_.push_back(std::move(p.end));
  }
  pending_.clear();
}

std::vector<OpTiming> OpTimer::totals() {
  fold_pending();
  std::vector<OpTiming> out;
  for (const auto& [name, t] : totals_) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const OpTiming& a, const OpTiming& b) { return a.milliseconds > b.milliseconds; });
  return out;
}

void OpTimer::reset() {
  fold_pending();
  totals_.clear();
}

}  // namespace trlhpc::cuda
