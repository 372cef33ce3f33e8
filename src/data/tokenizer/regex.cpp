#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.hpp"

#include <pcre2.h>

#include "trlhpc/core/error.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {
// The Unicode White_Space property as class members.
constexpr const char* kWhiteSpace =
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}
}  // namespace

std::string translate_whitespace_escapes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 'Q') {  // \Q...\E is literal text
        const size_t close = pattern.find("\\E", i + 1);
        const size_t stop = close == std::string_view::npos ? pattern.size() : close + 2;
        out.append(pattern.substr(i - 1, stop - (i - 1)));
        i = stop - 1;
      } else if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(pattern.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

RegexScratch::RegexScratch() : data_(pcre2_match_data_create(1, nullptr)) {
  if (data_ == nullptr) throw_runtime_failure("PCRE2", "pcre2_match_data_create", "out of memory", __FILE__, __LINE__);
}
RegexScratch::~RegexScratch() { pcre2_match_data_free(data_); }

Regex::Regex(std::string_view pattern, const std::string& where) {
  const std::string translated = translate_whitespace_escapes(pattern);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                        &error, &error_offset, nullptr);
  TRLHPC_REQUIRE(code_ != nullptr, where + ": cannot compile the regex \"" + std::string(pattern) +
                                       "\": " + pcre2_message(error) + " (PCRE2, at offset " +
                                       std::to_string(error_offset) + " of the translated pattern); " +
                                       "use a pattern in Oniguruma/PCRE syntax");
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(code_);
}

Regex::Regex(Regex&& other) noexcept : code_(other.code_), jit_(other.jit_) { other.code_ = nullptr; }

void Regex::find_all(std::string_view subject, RegexScratch& scratch, std::vector<ByteSpan>& matches) const {
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  pcre2_match_data* data = scratch.get();
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  size_t start = 0;
  while (start <= subject.size()) {
    int rc = jit_ ? pcre2_jit_match(code_, text, subject.size(), start, 0, data, nullptr)
                  : PCRE2_ERROR_JIT_BADOPTION;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_JIT_BADOPTION)
      rc = pcre2_match(code_, text, subject.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw_runtime_failure("PCRE2", "pcre2_match", pcre2_message(rc), __FILE__, __LINE__);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
      start = end;
    } else {  // empty match: step over one character
      if (begin >= subject.size()) return;
      start = begin + utf8_sequence_length(static_cast<unsigned char>(subject[begin]));
    }
  }
}

}  // namespace trlhpc::tokenizer::detail
