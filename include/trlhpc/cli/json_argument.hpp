#pragma once
// A TrainingArguments value that is a JSON object or the path of a JSON file (--deepspeed, --fsdp_config):
// a value starting with '{' is the object itself (TrainingArguments takes a dict; a --config YAML mapping
// arrives here as its JSON text), anything else a file. Comments are allowed, as DeepSpeed's loader does.
#include <nlohmann/json.hpp>
#include <string>

namespace trlhpc {

// Parses `source` given to `--flag`; `origin` becomes "--flag FILE" or "--flag (inline JSON)", for the
// caller's messages. UserError when the file is missing or the text is not a JSON object (`what_it_is`
// says what was expected, e.g. "a DeepSpeed config").
nlohmann::json read_json_argument(const std::string& flag, const std::string& source, const std::string& what_it_is,
                                  std::string& origin);

}  // namespace trlhpc
