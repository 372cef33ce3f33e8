#include "added_tokens.hpp"

#include <algorithm>

#include "normalizer.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// \w of the Rust regex crate (Unicode): Alphabetic, marks, decimal digits, connector punctuation,
// joiners. Approximated with general categories (Alphabetic = letters, Nl and some marks).
bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  static const Regex word(R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "tokenizer word class");
  std::string encoded;
  append_utf8(encoded, c);
  RegexScratch scratch;
  std::vector<ByteSpan> matches;
  word.find_all(encoded, scratch, matches);
  return !matches.empty();
}

char32_t last_char(std::string_view text) {
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t length;
  return decode_utf8(text, start, length);
}

// Start of the trailing whitespace of `text` (text.size() when there is none).
size_t trailing_whitespace_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t length;
    if (!is_unicode_whitespace(decode_utf8(text, start, length))) break;
    end = start;
  }
  return end;
}

size_t leading_whitespace_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length;
    if (!is_unicode_whitespace(decode_utf8(text, pos, length))) break;
    pos += length;
  }
  return pos;
}

}  // namespace

void LiteralSetMatcher::add(std::string_view pattern, int32_t index) {
  if (pattern.empty()) return;
  first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
  int32_t node = 0;
  for (unsigned char byte : pattern) {
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& children = nodes_[static_cast<size_t>(node)].children;
      children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
                      {byte, next});
    }
    node = next;
  }
  if (nodes_[static_cast<size_t>(node)].pattern < 0) nodes_[static_cast<size_t>(node)].pattern = index;
}

int32_t LiteralSetMatcher::child(int32_t node, unsigned char byte) const {
  const auto& children = nodes_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

void LiteralSetMatcher::find_all(std::string_view text, std::vector<Match>& out) const {
  if (empty()) return;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    if (!first_bytes_[p[i]]) {
      ++i;
      continue;
    }
    int32_t node = 0, best_pattern = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, p[j]);
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].pattern >= 0) {
        best_pattern = nodes_[static_cast<size_t>(node)].pattern;
        best_end = j + 1;
      }
    }
    if (best_pattern < 0) {
      ++i;
      continue;
    }
    out.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(best_end), best_pattern});
    i = best_end;
  }
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    index_by_id_[token.id] = i;
    index_by_content_[token.content] = i;
    if (token.normalized) {
      const std::string pattern = normalizer ? normalize_string(*normalizer, token.content) : token.content;
      normalized_matcher_.add(pattern, static_cast<int32_t>(i));
    } else {
      raw_matcher_.add(token.content, static_cast<int32_t>(i));
    }
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  const auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  const auto it = index_by_content_.find(std::string(content));
  return it == index_by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split(std::string_view text, bool normalized_tokens, std::vector<TextSplit>& out) const {
  const LiteralSetMatcher& matcher = normalized_tokens ? normalized_matcher_ : raw_matcher_;
  std::vector<LiteralSetMatcher::Match> matches;
  matcher.find_all(text, matches);
  size_t start_offset = 0;
  for (const auto& m : matches) {
    const AddedToken& token = tokens_[static_cast<size_t>(m.pattern)];
    size_t start = m.begin, stop = m.end;
    if (token.single_word) {
      const bool space_before = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      size_t length;
      const bool space_after = stop == text.size() || !is_word_char(decode_utf8(text, stop, length));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_whitespace_start(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += leading_whitespace_length(text.substr(stop));
    if (start > start_offset) out.push_back({{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start)}, -1});
    out.push_back({{static_cast<uint32_t>(start), static_cast<uint32_t>(stop)}, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size())
    out.push_back({{static_cast<uint32_t>(start_offset), static_cast<uint32_t>(text.size())}, -1});
}

}  // namespace trlhpc::tokenizer::detail
