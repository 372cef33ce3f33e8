#pragma once
// The byte-level alphabet of GPT-2 (bytes_to_unicode in openai/gpt-2 encoder.py), used by the
// ByteLevel pre-tokenizer and decoder: every byte becomes one printable code point, so a byte-level
// vocabulary stores arbitrary bytes as text. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ... (space -> U+0120 "Ġ",
// newline -> U+010A "Ċ").
//
// trlhpc applies the mapping to the vocabulary once at load time instead of to every input piece:
// the BPE model of a byte-level tokenizer works on raw bytes, which gives identical tokens.
#include <cstdint>
#include <string>
#include <string_view>

namespace trlhpc::tokenizer::detail {

// The bytes a byte-level token stands for; false (and `bytes` unspecified) when a character of
// `token` is not in the alphabet.
bool byte_level_decode(std::string_view token, std::string& bytes);

}  // namespace trlhpc::tokenizer::detail
