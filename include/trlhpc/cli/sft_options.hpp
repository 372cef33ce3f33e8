#pragma once
// Command-line and YAML options of `trlhpc sft` (CONTRACT.md), parsed into an SftConfig.
// `--config FILE.yaml` holds the same keys as the flags; flags given on the command line win.
// Unknown flags or YAML keys, and values of the wrong type, are UserErrors naming the key.
#include <string>
#include <vector>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

// Parses argv (without the program name and the "sft" word). Returns false when --help was printed.
bool parse_sft_options(const std::vector<std::string>& args, SftConfig& config, std::string* help_text);

}  // namespace trlhpc
