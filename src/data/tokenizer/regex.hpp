#pragma once
// Regular expressions of tokenizer.json (Split pre-tokenizer, Replace normalizer) on PCRE2 with JIT.
//
// The library compiles these patterns with Oniguruma. PCRE2 with PCRE2_UTF|PCRE2_UCP agrees on the
// syntax the tokenizers use (\p{L}, \p{N}, (?i:...), lookahead) except for \s: PCRE2 also counts
// U+180E as a space. \s (and \S outside a character class) is therefore rewritten to the explicit
// Unicode White_Space set, which is what Oniguruma matches.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aligned_text.hpp"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace trlhpc::tokenizer::detail {

// Per-thread match state; one per encode call, reused for every match.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;
  pcre2_real_match_data_8* get() const { return data_; }

 private:
  pcre2_real_match_data_8* data_;
};

class Regex {
 public:
  // `pattern` in the syntax of tokenizer.json; `where` names the file and field for error messages.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&&) = delete;
  Regex(const Regex&) = delete;

  // Appends [begin, end) of each non-empty match in `subject` (valid UTF-8), left to right and
  // non-overlapping, offsets relative to `subject`.
  void find_all(std::string_view subject, RegexScratch& scratch, std::vector<ByteSpan>& matches) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

// `pattern` with \s and \S replaced by the Unicode White_Space set (exposed for the tests).
std::string translate_whitespace_escapes(std::string_view pattern);

}  // namespace trlhpc::tokenizer::detail
