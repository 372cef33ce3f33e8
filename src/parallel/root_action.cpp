#include "trlhpc/parallel/root_action.hpp"

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/communicator.hpp"

namespace trlhpc {

void broadcast_text(Communicator& comm, std::string& text, int root) {
  int64_t size = static_cast<int64_t>(text.size());
  comm.broadcast(std::span<int64_t>(&size, 1), root);
  std::vector<uint8_t> bytes(text.begin(), text.end());
  bytes.resize(static_cast<size_t>(size));
  if (size > 0) comm.broadcast(std::span<uint8_t>(bytes), root);
  text.assign(bytes.begin(), bytes.end());
}

void run_on_root(Communicator& comm, const std::function<void()>& action) {
  enum : int32_t { kOk = 0, kUserError = 1, kFailure = 2 };
  int32_t status = kOk;
  std::string message;
  if (comm.rank() == 0) {
    try {
      action();
    } catch (const UserError& e) {
      status = kUserError;
      message = e.what();
    } catch (const std::exception& e) {
      status = kFailure;
      message = e.what();
    }
  }
  comm.broadcast(std::span<int32_t>(&status, 1), 0);
  if (status == kOk) return;
  broadcast_text(comm, message);
  if (status == kUserError) throw UserError(message);
  throw RuntimeFailure(message);
}

}  // namespace trlhpc
