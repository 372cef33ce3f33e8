#include "trlhpc/core/error.hpp"

#include <sstream>

namespace trlhpc {
namespace {
ProcessIdentity& identity_storage() {
  static ProcessIdentity identity;
  return identity;
}
}  // namespace

const ProcessIdentity& process_identity() { return identity_storage(); }

void set_process_identity(int world_rank, std::string host) {
  identity_storage() = ProcessIdentity{world_rank, std::move(host)};
}

std::string rank_prefix() {
  const auto& id = process_identity();
  if (id.world_rank < 0) return "";
  return "[rank " + std::to_string(id.world_rank) + " @ " + id.host + "] ";
}

void throw_runtime_failure(const char* library, const char* expr, const std::string& detail, const char* file,
                           int line) {
  std::ostringstream os;
  os << rank_prefix() << library << " failure: " << expr << " -> " << detail << " (" << file << ":" << line << ")";
  throw RuntimeFailure(os.str());
}

void throw_user_error(const std::string& message) { throw UserError(message); }

}  // namespace trlhpc
