#pragma once
// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split, ByteLevel, Metaspace, Digits,
// WhitespaceSplit and Sequence. They cut a normalized stretch of text into the pieces ("words") the
// BPE model encodes one by one, as the library's PreTokenizedString::split does: each step works on
// every piece of the previous step, and empty pieces are dropped.
//
// ByteLevel's byte -> alphabet mapping is not applied here: byte-level models work on raw bytes (see
// byte_level.hpp), so ByteLevel must be the last step. Other types (Whitespace,
// BertPreTokenizer, Punctuation, UnicodeScripts, CharDelimiterSplit) are rejected at load time.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "aligned_text.hpp"
#include "regex.hpp"

namespace trlhpc::tokenizer::detail {

// A normalized stretch of the input and the pieces cut from it.
struct Segment {
  AlignedText normalized;
  std::vector<ByteSpan> pieces;  // non-empty [begin, end) of normalized.text, in order
  bool starts_input = false;     // the stretch begins at input byte 0 (Metaspace prepend_scheme "first")
};

struct PreTokenizeScratch {
  RegexScratch regex;
  std::vector<ByteSpan> matches;
  std::vector<ByteSpan> pieces;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(Segment& segment, PreTokenizeScratch& scratch) const = 0;
};

// The pre-tokenizer described by `spec`, or nullptr for null. `where` names the file for errors.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec, const std::string& where);

// True when `spec` contains a ByteLevel step (validated to be the last one).
bool pre_tokenizer_is_byte_level(const nlohmann::json& spec, const std::string& where);

// The pattern ByteLevel uses with use_regex=true (GPT-2's encoder.py).
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// The Qwen2 pattern (transformers' Qwen2Tokenizer).
inline constexpr const char* kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace trlhpc::tokenizer::detail
