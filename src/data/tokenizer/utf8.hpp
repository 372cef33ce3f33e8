#pragma once
// UTF-8 helpers for the tokenizer: decoding code points, validation, lossy repair and the Unicode
// White_Space property (what Rust's char::is_whitespace and Oniguruma's \s test).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trlhpc::tokenizer::detail {

// Bytes in the UTF-8 sequence that starts with `lead` (1 for ASCII and for stray continuation bytes).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Code point starting at text[pos] of valid UTF-8; sets `length` to its byte count.
inline char32_t decode_utf8(std::string_view text, size_t pos, size_t& length) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  if (p[0] < 0x80) {
    length = 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    length = 2;
    return (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    length = 3;
    return (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  length = 4;
  return (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

void append_utf8(std::string& out, char32_t code_point);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every maximal ill-formed subsequence replaced by U+FFFD (Unicode 15 section 3.9,
// "substitution of maximal subparts", as Rust's String::from_utf8_lossy does).
// With `offsets`, also where each byte offset of the result lies in `text`: a range [b, e) of the
// result covers [offsets->begin[b], offsets->end[e]) of `text` (a range that starts or ends inside a
// U+FFFD covers the whole ill-formed subsequence it replaced).
struct RepairedOffsets {
  std::vector<size_t> begin, end;  // (result size + 1)
};
std::string repair_utf8(std::string_view text, RepairedOffsets* offsets = nullptr);

// The Unicode White_Space property.
inline bool is_unicode_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace trlhpc::tokenizer::detail
