#pragma once
// Added tokens (tokenizer.json "added_tokens", tokenizer_config.json "added_tokens_decoder"): strings
// such as "<|im_start|>" or "<s>" that are cut out of the text before the model sees it, as the
// library's AddedVocabulary does.
//
// Tokens with normalized=false are matched in the raw input; the stretches between them are then
// normalized and tokens with normalized=true are matched in the normalized text (their content is
// normalized the same way first). Matching is leftmost-longest and non-overlapping (the library's
// Aho-Corasick MatchKind::LeftmostLongest). Then, per match:
//   single_word: dropped when a word character touches it on either side;
//   lstrip / rstrip: the match grows over whitespace to its left / right.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aligned_text.hpp"
#include "regex.hpp"

namespace trlhpc::tokenizer::detail {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A stretch of text: an added token (token_id >= 0) or text for the model (token_id == -1).
struct TextSplit {
  ByteSpan span;
  int32_t token_id;
};

// Leftmost-longest search for a set of byte strings, by a byte trie.
class LiteralSetMatcher {
 public:
  struct Match {
    uint32_t begin, end;
    int32_t pattern;  // index given to add()
  };
  void add(std::string_view pattern, int32_t index);
  bool empty() const { return nodes_.size() <= 1; }
  void find_all(std::string_view text, std::vector<Match>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t pattern = -1;
  };
  int32_t child(int32_t node, unsigned char byte) const;
  std::vector<Node> nodes_{Node{}};
  bool first_bytes_[256] = {};
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` (may be null) is applied to the content of normalized=true tokens.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits `text` by the tokens with normalized == `normalized_tokens` (the library's find_matches):
  // the splits cover `text` in order; empty stretches are left out.
  void split(std::string_view text, bool normalized_tokens, std::vector<TextSplit>& out) const;

  bool has_normalized_tokens() const { return !normalized_matcher_.empty(); }
  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, size_t> index_by_content_;
  LiteralSetMatcher raw_matcher_;
  LiteralSetMatcher normalized_matcher_;
};

}  // namespace trlhpc::tokenizer::detail
