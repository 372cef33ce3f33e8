#pragma once
// Errors in trlhpc.
//
// Two families, matching the exit codes of CONTRACT.md:
//   UserError     -> exit 1: bad usage or input. The message names the option, file or line and says
//                    what to do. Raised identically on every rank (validate before any collective).
//   RuntimeFailure-> exit 2: a library call failed (MPI, CUDA, NCCL, cuBLAS, HDF5, the OS).
// Check macros capture the failing expression, file:line, and the rank and host of the process, so a
// message from rank 5 of 64 says where it came from.
#include <stdexcept>
#include <string>

namespace trlhpc {

// Rank/host stamped into error messages. Set once by the MPI environment; "?" before MPI_Init.
struct ProcessIdentity {
  int world_rank = -1;
  std::string host = "?";
};
// Read-only after MpiEnvironment sets it at start-up (the single write happens before any thread starts).
const ProcessIdentity& process_identity();
void set_process_identity(int world_rank, std::string host);

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& what) : std::runtime_error(what) {}
};

// "[rank 3 @ node07] " or "" before MPI is up.
std::string rank_prefix();

[[noreturn]] void throw_runtime_failure(const char* library, const char* expr, const std::string& detail,
                                        const char* file, int line);
[[noreturn]] void throw_user_error(const std::string& message);


}  // namespace trlhpc

// Internal invariant (a bug in trlhpc, not the user's input).
#define TRLHPC_ASSERT(cond, msg)                                                                    \
  do {                                                                                              \
    if (!(cond))                                                                                    \
      ::trlhpc::throw_runtime_failure("trlhpc", #cond, (msg), __FILE__, __LINE__);                  \
  } while (0)

// Bad input: the message must say what is wrong and what to do.
#define TRLHPC_REQUIRE(cond, msg)                                                                   \
  do {                                                                                              \
    if (!(cond)) ::trlhpc::throw_user_error(msg);                                                   \
  } while (0)
