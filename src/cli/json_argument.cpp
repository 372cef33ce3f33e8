#include "trlhpc/cli/json_argument.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

nlohmann::json read_json_argument(const std::string& flag, const std::string& source, const std::string& what_it_is,
                                  std::string& origin) {
  const bool inline_object = !source.empty() && source.front() == '{';
  origin = inline_object ? "--" + flag + " (inline JSON)" : "--" + flag + " " + source;
  std::string text = source;
  if (!inline_object) {
    if (!std::filesystem::exists(source)) throw UserError(origin + ": file not found");
    std::ifstream in(source);
    std::stringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (value.is_discarded() || !value.is_object()) throw UserError(origin + ": not a JSON object (" + what_it_is + ")");
  return value;
}

}  // namespace trlhpc
