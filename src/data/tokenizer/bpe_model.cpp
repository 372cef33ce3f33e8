#include "bpe_model.hpp"

#include <algorithm>
#include <cstdio>

#include "byte_level.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// Pops the candidate with the lowest rank, then the lowest position (the library's Merge ordering).
bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
}

std::string model_form(const std::string& token, bool byte_level, const std::string& file, const char* what) {
  if (!byte_level) return token;
  std::string bytes;
  TRLHPC_REQUIRE(byte_level_decode(token, bytes),
                 file + ": " + what + " \"" + token + "\" is not in the byte-level alphabet of the ByteLevel " +
                     "pre-tokenizer; the vocabulary does not belong to a byte-level tokenizer");
  return bytes;
}

}  // namespace

BpeModel::BpeModel(BpeModelSpec spec, const std::string& file)
    : byte_level_(spec.byte_level),
      byte_fallback_(spec.byte_fallback),
      fuse_unk_(spec.fuse_unk),
      ignore_merges_(spec.ignore_merges) {
  int32_t max_id = -1;
  vocab_.reserve(spec.vocab.size());
  if (byte_level_) byte_vocab_.reserve(spec.vocab.size());
  std::string bytes;
  for (const auto& [token, id] : spec.vocab) {
    TRLHPC_REQUIRE(id >= 0 && id <= kMaxTokenId, file + ": vocabulary id " + std::to_string(id) + " of \"" + token +
                                                     "\" is outside 0.." + std::to_string(kMaxTokenId) + " (kMaxTokenId)");
    vocab_.assign(token, id);
    // Tokens outside the alphabet can never be produced from bytes; they stay reachable by id only.
    if (byte_level_ && byte_level_decode(token, bytes)) byte_vocab_.assign(bytes, id);
    max_id = std::max(max_id, id);
  }
  tokens_by_id_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : spec.vocab) {
    tokens_by_id_[static_cast<size_t>(id)] = token;
    has_id_[static_cast<size_t>(id)] = true;
  }

  prefix_ = model_form(spec.continuing_subword_prefix, byte_level_, file, "continuing_subword_prefix");
  suffix_ = model_form(spec.end_of_word_suffix, byte_level_, file, "end_of_word_suffix");

  merges_.reserve(spec.merges.size());
  const StringIdTable& lookup = model_vocab();
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const std::string left_form = model_form(left, byte_level_, file, "merge token");
    const std::string right_form = model_form(right, byte_level_, file, "merge token");
    const int32_t left_id = lookup.find(left_form);
    const int32_t right_id = lookup.find(right_form);
    const int32_t new_id = lookup.find(left_form + right_form);
    TRLHPC_REQUIRE(left_id >= 0 && right_id >= 0 && new_id >= 0,
                   file + ": merge " + std::to_string(rank) + " \"" + left + " " + right + "\" uses or makes a " +
                       "token that is not in the vocabulary; the merges do not belong to this vocabulary");
    merges_.assign(left_id, right_id, Merge{static_cast<int32_t>(rank), new_id});
  }

  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    byte_symbol_ids_[static_cast<size_t>(b)] = byte_level_ ? byte_vocab_.find(std::string_view(&byte, 1)) : -1;
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_ids_[static_cast<size_t>(b)] = vocab_.find(name);
  }
  if (spec.unk_token) {
    unk_id_ = vocab_.find(*spec.unk_token);
    TRLHPC_REQUIRE(unk_id_ >= 0, file + ": unk_token \"" + *spec.unk_token + "\" is not in the model vocabulary");
  }
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_by_id_.size() || !has_id_[static_cast<size_t>(id)]) return nullptr;
  return &tokens_by_id_[static_cast<size_t>(id)];
}

void BpeModel::add_symbol(BpeScratch& scratch, int32_t id, uint32_t length) const {
  const auto index = static_cast<int32_t>(scratch.symbols.size());
  if (index > 0) scratch.symbols.back().next = index;
  scratch.symbols.push_back({id, index - 1, -1, length});
}

// The library's BPE::merge_word up to (not including) merge_all.
void BpeModel::split_into_symbols(std::string_view piece, BpeScratch& scratch) const {
  scratch.symbols.clear();
  if (byte_level_ && prefix_.empty() && suffix_.empty()) {
    bool all_known = true;
    for (unsigned char b : piece) all_known &= byte_symbol_ids_[b] >= 0;
    if (all_known) {
      for (unsigned char b : piece) add_symbol(scratch, byte_symbol_ids_[b], 1);
      return;
    }
  }
  const StringIdTable& lookup = model_vocab();
  int32_t pending_unk_length = -1;  // an unk symbol waiting to be added (fuse_unk grows it)
  std::string with_affixes;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t length = byte_level_ ? 1 : utf8_sequence_length(static_cast<unsigned char>(piece[pos]));
    std::string_view symbol = piece.substr(pos, length);
    const bool first = pos == 0, last = pos + length >= piece.size();
    if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
      with_affixes.assign(!first ? prefix_ : std::string());
      with_affixes.append(symbol);
      if (last) with_affixes.append(suffix_);
      symbol = with_affixes;
    }
    pos += length;
    const int32_t id = lookup.find(symbol);
    if (id >= 0) {
      if (pending_unk_length >= 0) add_symbol(scratch, unk_id_, static_cast<uint32_t>(pending_unk_length));
      pending_unk_length = -1;
      add_symbol(scratch, id, static_cast<uint32_t>(length));
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (unsigned char b : symbol) all_bytes &= byte_fallback_ids_[b] >= 0;
      if (all_bytes) {  // as in the library, a pending unk is not flushed first
        for (unsigned char b : symbol) add_symbol(scratch, byte_fallback_ids_[b], 1);
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no unk token: the character is dropped, as in the library
    if (pending_unk_length >= 0 && fuse_unk_) {
      pending_unk_length += static_cast<int32_t>(length);
    } else {
      if (pending_unk_length >= 0) add_symbol(scratch, unk_id_, static_cast<uint32_t>(pending_unk_length));
      pending_unk_length = static_cast<int32_t>(length);
    }
  }
  if (pending_unk_length >= 0) add_symbol(scratch, unk_id_, static_cast<uint32_t>(pending_unk_length));
}

// The library's Word::merge_all (without dropout).
void BpeModel::merge_symbols(BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  auto& queue = scratch.queue;
  queue.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = merges_.find(symbols[i].id, symbols[i + 1].id))
      queue.push_back({m->rank, static_cast<int32_t>(i), m->new_id});
  }
  std::make_heap(queue.begin(), queue.end(), later);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const BpeScratch::Candidate top = queue.back();
    queue.pop_back();
    BpeScratch::Symbol& left = symbols[static_cast<size_t>(top.position)];
    if (left.length == 0 || left.next < 0) continue;
    const BpeScratch::Symbol right = symbols[static_cast<size_t>(left.next)];
    const Merge* current = merges_.find(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;  // stale entry

    symbols[static_cast<size_t>(left.next)].length = 0;
    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.position;

    if (left.prev >= 0) {
      if (const Merge* m = merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id)) {
        queue.push_back({m->rank, left.prev, m->new_id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
    if (left.next >= 0) {
      if (const Merge* m = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) {
        queue.push_back({m->rank, top.position, m->new_id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
  }
}

void BpeModel::tokenize(std::string_view piece, BpeScratch& scratch, std::vector<ModelToken>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const int32_t id = model_vocab().find(piece);
    if (id >= 0) {
      out.push_back({id, static_cast<uint32_t>(piece.size())});
      return;
    }
  }
  if (cache_.lookup(piece, out)) return;
  split_into_symbols(piece, scratch);
  merge_symbols(scratch);
  scratch.tokens.clear();
  for (const auto& symbol : scratch.symbols)
    if (symbol.length != 0) scratch.tokens.push_back({symbol.id, symbol.length});
  out.insert(out.end(), scratch.tokens.begin(), scratch.tokens.end());
  cache_.insert(piece, scratch.tokens.data(), scratch.tokens.size());
}

}  // namespace trlhpc::tokenizer::detail
