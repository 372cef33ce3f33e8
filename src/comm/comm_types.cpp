#include "trlhpc/comm/comm_types.hpp"

#include <exception>

namespace trlhpc {

size_t element_size(ElementType type) {
  switch (type) {
    case ElementType::F32: return 4;
    case ElementType::F64: return 8;
    case ElementType::I32: return 4;
    case ElementType::I64: return 8;
    case ElementType::U8: return 1;
    case ElementType::BF16: return 2;
  }
  return 0;
}

CommRequest::CommRequest(std::unique_ptr<PendingOperation> pending)
    : pending_(std::move(pending)), uncaught_at_start_(std::uncaught_exceptions()) {}

CommRequest::~CommRequest() { finish_on_destruction(); }

CommRequest& CommRequest::operator=(CommRequest&& other) noexcept {
  if (this != &other) {
    finish_on_destruction();
    pending_ = std::move(other.pending_);
    uncaught_at_start_ = other.uncaught_at_start_;
  }
  return *this;
}

void CommRequest::finish_on_destruction() noexcept {
  if (!pending_) return;
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    (void)pending_.release();  // leaked, not freed, in case MPI still reads its arrays; abandoned on purpose: see the header (the job is about to abort)
    return;
  }
  try {
    pending_->wait();
  } catch (...) {
    // A destructor cannot report; the next collective on this communicator fails with the cause.
  }
  pending_.reset();
}

void CommRequest::wait() {
  if (!pending_) return;
  pending_->wait();
  pending_.reset();
}

bool CommRequest::test() {
  if (!pending_) return true;
  if (!pending_->test()) return false;
  pending_.reset();
  return true;
}

}  // namespace trlhpc
