// OpTimer (see op_timer.cuh).
#include <algorithm>

#include "op_timer.cuh"

namespace trlhpc::cuda {

CudaEvent OpTimer::take_event() {
  if (spare_.empty()) return CudaEvent(true);
  CudaEvent e = std::move(spare_.back());
  spare_.pop_back();
  return e;
}

OpTimer::Scope::Scope(OpTimer* timer, const char* name, cudaStream_t stream)
    : timer_(timer), stream_(stream), name_(name) {
  if (!timer_) return;
  start_.emplace(timer_->take_event());
  end_.emplace(timer_->take_event());
  start_->record(stream_);
}

OpTimer::Scope::~Scope() {
  if (!timer_) return;
  try {  // no throw from a destructor: a failing record leaves this op untimed
    end_->record(stream_);
    if (timer_->pending_.size() >= kMaxPending) timer_->fold_pending();
    timer_->pending_.push_back(Pending{name_, std::move(*start_), std::move(*end_)});
  } catch (...) {
  }
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
