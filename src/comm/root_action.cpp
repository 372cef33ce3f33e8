#include "trlhpc/comm/root_action.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

void broadcast_text(Communicator& comm, std::string& text, int root) {
  int64_t size = static_cast<int64_t>(text.size());
  comm.broadcast(std::span<int64_t>(&size, 1), root);
  std::vector<uint8_t> bytes(text.begin(), text.end());
  bytes.resize(static_cast<size_t>(size));
  if (size > 0) comm.broadcast(std::span<uint8_t>(bytes), root);
  text.assign(bytes.begin(), bytes.end());
}

std::vector<int64_t> run_on_root(Communicator& comm, size_t count, const std::function<std::vector<int64_t>()>& action) {
  enum : int64_t { kOk = 0, kUserError = 1, kFailure = 2 };
  std::vector<int64_t> message_head(1 + count, 0);  // the outcome, then the answer
  std::string message;
  if (comm.rank() == 0) {
    try {
      const std::vector<int64_t> answer = action();
      TRLHPC_ASSERT(answer.size() == count, "run_on_root: the action answered " + std::to_string(answer.size()) +
                                                " numbers, not " + std::to_string(count));
      std::copy(answer.begin(), answer.end(), message_head.begin() + 1);
    } catch (const UserError& e) {
      message_head[0] = kUserError;
      message = e.what();
    } catch (const std::exception& e) {
      message_head[0] = kFailure;
      message = e.what();
    }
  }
  comm.broadcast(std::span<int64_t>(message_head), 0);
  if (message_head[0] == kOk) return std::vector<int64_t>(message_head.begin() + 1, message_head.end());
  broadcast_text(comm, message);
  if (message_head[0] == kUserError) throw UserError(message);
  throw RuntimeFailure(message);
}

void run_on_root(Communicator& comm, const std::function<void()>& action) {
  run_on_root(comm, 0, [&] {
    action();
    return std::vector<int64_t>{};
  });
}

}  // namespace trlhpc
