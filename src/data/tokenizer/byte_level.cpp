#include "byte_level.hpp"

#include <array>

#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

constexpr bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Alphabet {
  std::array<char32_t, 256> char_of{};
  std::array<int16_t, 0x144> byte_of{};  // code points below U+0144; -1 outside the alphabet
};

constexpr Alphabet make_alphabet() {
  Alphabet a;
  for (auto& b : a.byte_of) b = -1;
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    a.char_of[b] = stands_for_itself(b) ? char32_t(b) : next++;
    a.byte_of[a.char_of[b]] = static_cast<int16_t>(b);
  }
  return a;
}

constexpr Alphabet kAlphabet = make_alphabet();

}  // namespace

bool byte_level_decode(std::string_view token, std::string& bytes) {
  bytes.clear();
  for (size_t pos = 0; pos < token.size();) {
    const unsigned char lead = static_cast<unsigned char>(token[pos]);
    const size_t length = utf8_sequence_length(lead);
    if (pos + length > token.size()) return false;
    size_t decoded_length;
    const char32_t c = decode_utf8(token, pos, decoded_length);
    if (c >= kAlphabet.byte_of.size() || kAlphabet.byte_of[c] < 0) return false;
    bytes.push_back(static_cast<char>(kAlphabet.byte_of[c]));
    pos += length;
  }
  return true;
}

}  // namespace trlhpc::tokenizer::detail
