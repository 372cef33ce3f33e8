#pragma once
// Command-line and YAML options of `trlhpc sft` (CONTRACT.md), parsed into an SftConfig.
// `--config FILE.yaml` holds the same keys as the flags; flags given on the command line win.
// Unknown flags or YAML keys, and values of the wrong type, are UserErrors naming the key. Every argument
// of TRL's dataclasses is known (cli/trl_fields.hpp): honored, mapped, accepted as a no-op or refused by
// name; a YAML null (TRL's None) leaves trlhpc's default.
#include <string>
#include <vector>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

// What option parsing needs to know about the job: `--accelerate_config` files are checked against the
// world size (num_processes, parallelism sizes), and their warnings are printed once, by rank 0. The
// caller says (main takes it from MpiEnvironment): parsing never asks MPI itself.
struct SftOptionContext {
  int world_size = 1;
  bool is_main = true;
  // Notes on mapped TRL arguments (cli/trl_fields.hpp), each once: appended here when set, else printed
  // by the main rank to stderr.
  std::vector<std::string>* notes = nullptr;
};

// Parses argv (without the program name and the "sft" word). Returns false when --help was printed.
// With --accelerate_config, the profile or file is read (cli/accelerate_config.hpp) and fills every
// setting whose flag was not given explicitly (on the command line or in --config).
bool parse_sft_options(const std::vector<std::string>& args, SftConfig& config, std::string* help_text,
                       const SftOptionContext& context);

}  // namespace trlhpc
