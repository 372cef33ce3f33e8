#pragma once
// The BPE model of the `tokenizers` library (model type "BPE"): a vocabulary, ranked merges, and the
// merge loop that turns one pre-tokenized piece into tokens.
//
// For one piece: each character becomes a symbol (its vocabulary id; with byte_fallback the
// <0xXX> tokens of its bytes when the character is not in the vocabulary; otherwise the unk token,
// consecutive unknowns fused when fuse_unk). Then, repeatedly, the adjacent pair with the lowest
// merge rank (leftmost among equals) is merged, using a priority queue over (rank, position) and a
// linked list of symbols, exactly the library's Word::merge_all (stale queue entries are skipped by
// re-checking the pair's merge). With ignore_merges, a piece that is itself in the vocabulary is
// one token without merging (Llama-3).
//
// A byte-level model (the tokenizer has a ByteLevel pre-tokenizer) works on raw bytes: its
// vocabulary and merges are mapped out of the GPT-2 alphabet at load time, so each byte is one symbol.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "token_table.hpp"
#include "word_cache.hpp"

namespace trlhpc::tokenizer::detail {

struct BpeModelSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;          // token as written in the file -> id
  std::vector<std::pair<std::string, std::string>> merges;     // in rank order
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  bool byte_level = false;  // vocabulary in the GPT-2 byte-level alphabet; pieces are raw bytes
};

// Reusable per-call buffers of the merge loop.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    uint32_t length;  // bytes of the piece; 0 once merged into its left neighbour
  };
  struct Candidate {
    int32_t rank;
    int32_t position;  // index of the left symbol
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> queue;
  std::vector<ModelToken> tokens;
};

class BpeModel {
 public:
  // `file` names the source for error messages.
  BpeModel(BpeModelSpec spec, const std::string& file);

  // Appends the tokens of `piece` to `out`.
  void tokenize(std::string_view piece, BpeScratch& scratch, std::vector<ModelToken>& out) const;
  // Hint that `piece` will be tokenized soon (prefetches its word-cache entry).
  void prefetch(std::string_view piece) const { cache_.prefetch(piece); }

  // Vocabulary lookups with tokens as written in the file.
  int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }  // -1 if absent
  const std::string* id_to_token(int32_t id) const;
  size_t size() const { return vocab_.size(); }
  const std::vector<std::string>& tokens_by_id() const { return tokens_by_id_; }

 private:
  void split_into_symbols(std::string_view piece, BpeScratch& scratch) const;
  void merge_symbols(BpeScratch& scratch) const;
  void add_symbol(BpeScratch& scratch, int32_t id, uint32_t length) const;
  const StringIdTable& model_vocab() const { return byte_level_ ? byte_vocab_ : vocab_; }

  StringIdTable vocab_;       // tokens as in the file
  StringIdTable byte_vocab_;  // byte-level models: the bytes each token stands for
  std::vector<std::string> tokens_by_id_;
  std::vector<bool> has_id_;
  MergeTable merges_;
  std::array<int32_t, 256> byte_symbol_ids_{};     // byte-level: the id of each single byte, or -1
  std::array<int32_t, 256> byte_fallback_ids_{};   // the id of "<0xXX>", or -1
  std::string prefix_;  // continuing_subword_prefix (bytes for byte-level models)
  std::string suffix_;  // end_of_word_suffix
  int32_t unk_id_ = -1;
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  WordCache cache_;
};

}  // namespace trlhpc::tokenizer::detail
