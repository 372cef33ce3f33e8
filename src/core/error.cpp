#include "trlhpc/core/error.hpp"

#include <hdf5.h>

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

// mpi_error_string is defined in src/runtime/mpi_error_string.cpp: MPI calls live in runtime/ and
// parallel/ only (TRLHPC_CHECK_MPI is expanded only there).

namespace {
herr_t collect_innermost(unsigned n, const H5E_error2_t* err, void* out) {
  if (n == 0 && err->desc) *static_cast<std::string*>(out) = std::string(err->func_name) + ": " + err->desc;
  return 0;
}
}  // namespace

std::string hdf5_error_string() {
  std::string message = "unknown HDF5 error";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_innermost, &message);
  return message;
}

}  // namespace trlhpc
