// Streaming splitter for a file holding one JSON array: yields the source text of each element so a
// multi-gigabyte array never sits in memory as one document. It only tracks nesting depth and string
// state (with escapes); the element text is then parsed by nlohmann::ordered_json, which reports any syntax error
// inside the element.
#include <istream>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset::detail {
namespace {
bool is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
}  // namespace

JsonArrayElementScanner::JsonArrayElementScanner(std::istream& in, std::string file)
    : in_(in), file_(std::move(file)) {}

int JsonArrayElementScanner::get() {
  int c = in_.rdbuf()->sbumpc();
  if (c == '\n') ++line_;
  return c;
}

// Skips whitespace and returns the next character without consuming it (EOF at the end).
int JsonArrayElementScanner::peek_non_space() {
  for (;;) {
    int c = in_.rdbuf()->sgetc();
    if (c == std::char_traits<char>::eof() || !is_space(c)) return c;
    get();
  }
}

bool JsonArrayElementScanner::next(std::string& text, int64_t& line) {
  constexpr int kEof = std::char_traits<char>::eof();
  auto where = [&] { return file_ + ":" + std::to_string(line_); };
  if (finished_) return false;
  if (!started_) {
    started_ = true;
    // A UTF-8 byte order mark is allowed before the array.
    if (in_.rdbuf()->sgetc() == 0xEF) {
      get();
      get();
      get();
    }
    int c = peek_non_space();
    TRLHPC_REQUIRE(c == '[', where() + ": expected a JSON array ('[') or one JSON object per line");
    get();
    if (peek_non_space() == ']') {
      get();
      finished_ = true;
    }
  } else {
    int c = peek_non_space();
    if (c == ']') {
      get();
      finished_ = true;
    } else {
      TRLHPC_REQUIRE(c != kEof, where() + ": the JSON array is not closed (file truncated?)");
      TRLHPC_REQUIRE(c == ',', where() + ": expected ',' or ']' between array elements (malformed JSON array)");
      get();
    }
  }
  if (finished_) {
    TRLHPC_REQUIRE(peek_non_space() == kEof, where() + ": unexpected text after the closing ']' of the array");
    return false;
  }

  int c = peek_non_space();
  TRLHPC_REQUIRE(c != kEof, where() + ": the JSON array is not closed (file truncated?)");
  TRLHPC_REQUIRE(c != ']' && c != ',', where() + ": empty array element (trailing or doubled ',')");
  text.clear();
  line = line_;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (;;) {
    c = in_.rdbuf()->sgetc();
    if (c == kEof) {
      TRLHPC_REQUIRE(depth == 0 && !in_string, file_ + ":" + std::to_string(line) +
                                                   ": this array element is not closed (file truncated?)");
      return true;  // a scalar at the very end; the missing ']' is reported by the next call
    }
    if (in_string) {
      get();
      text.push_back(static_cast<char>(c));
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return true;
      }
      continue;
    }
    if (depth == 0 && (c == ',' || c == ']' || (is_space(c) && !text.empty()))) return true;  // end of a scalar
    get();
    text.push_back(static_cast<char>(c));
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      TRLHPC_REQUIRE(depth >= 0, where() + ": unbalanced '" + std::string(1, static_cast<char>(c)) + "'");
      if (depth == 0) return true;
    }
  }
}

}  // namespace trlhpc::dataset::detail
