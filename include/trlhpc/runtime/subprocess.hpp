#pragma once
// Running another program (gnuplot for `trlhpc plot`) and waiting for it: posix_spawnp with an argv,
// so no shell parses user-given paths. Its standard output and error are captured for messages.
#include <optional>
#include <string>
#include <vector>

namespace trlhpc {

struct ProgramResult {
  int exit_code = 0;   // 128 + N when killed by signal N
  std::string output;  // standard output and error, interleaved
};

// argv[0] is searched on PATH. std::nullopt when it cannot be started (not installed); a failure of
// the OS calls around it is a RuntimeFailure.
std::optional<ProgramResult> run_program(const std::vector<std::string>& argv);

}  // namespace trlhpc
