#include "trlhpc/data/tokenizer/tokenizer.hpp"

#include <algorithm>

#include "tokenizer_impl.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer {
namespace {

// Buffers reused across the stretches and pieces of one encode call.
struct EncodeScratch {
  detail::PreTokenizeScratch pre_tokenize;
  detail::BpeScratch bpe;
  std::vector<detail::ModelToken> tokens;
  std::vector<detail::TextSplit> splits;
};

// Output of one encode call.
struct EncodeSink {
  std::vector<int32_t>& ids;
  std::vector<std::pair<size_t, size_t>>* offsets;
  void add(int32_t id, detail::ByteSpan span) {
    ids.push_back(id);
    if (offsets) offsets->emplace_back(span.begin, span.end);
  }
};

// Pre-tokenizes one normalized stretch and BPE-encodes its pieces.
void encode_stretch(const Tokenizer::Impl& impl, detail::AlignedText text, bool starts_input, EncodeScratch& scratch,
                    EncodeSink& sink) {
  if (text.text.empty()) return;
  detail::Segment segment{std::move(text), {}, starts_input};
  segment.pieces.push_back({0, static_cast<uint32_t>(segment.normalized.text.size())});
  if (impl.pre_tokenizer) impl.pre_tokenizer->pre_tokenize(segment, scratch.pre_tokenize);
  const std::string_view normalized = segment.normalized.text;
  // Word-cache lookups are bound by memory latency (a random cache line each); start loading the
  // entry of the piece kPrefetchDistance ahead while this one is encoded (about 10% on c4 text).
  constexpr size_t kPrefetchDistance = 4;
  const auto& pieces = segment.pieces;
  for (size_t i = 0; i < std::min(kPrefetchDistance, pieces.size()); ++i)
    impl.model->prefetch(normalized.substr(pieces[i].begin, pieces[i].end - pieces[i].begin));
  for (size_t index = 0; index < pieces.size(); ++index) {
    const detail::ByteSpan piece = pieces[index];
    if (index + kPrefetchDistance < pieces.size()) {
      const detail::ByteSpan ahead = pieces[index + kPrefetchDistance];
      impl.model->prefetch(normalized.substr(ahead.begin, ahead.end - ahead.begin));
    }
    scratch.tokens.clear();
    impl.model->tokenize(normalized.substr(piece.begin, piece.end - piece.begin), scratch.bpe, scratch.tokens);
    if (!sink.offsets) {
      for (const detail::ModelToken& t : scratch.tokens) sink.ids.push_back(t.id);
      continue;
    }
    uint32_t at = piece.begin;
    for (const detail::ModelToken& t : scratch.tokens) {
      const uint32_t end = std::min<uint32_t>(at + t.length, piece.end);
      sink.add(t.id, end > at ? segment.normalized.span(at, end) : detail::ByteSpan{});
      at = end;
    }
  }
}

}  // namespace

void Tokenizer::Impl::encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& ids,
                             std::vector<std::pair<size_t, size_t>>* offsets) const {
  EncodeSink sink{ids, offsets};
  EncodeScratch scratch;
  if (add_special_tokens)
    for (int32_t id : frame.before) sink.add(id, {});
  const bool track = offsets != nullptr;

  // 1. Added tokens matched in the raw text; 2. the rest normalized, then added tokens matched in
  // the normalized text; 3. what remains is pre-tokenized and encoded.
  std::vector<detail::TextSplit> raw_splits;
  added.split(text, false, raw_splits);
  std::vector<detail::TextSplit> normalized_splits;
  for (const detail::TextSplit& split : raw_splits) {
    if (split.token_id >= 0) {
      sink.add(split.token_id, split.span);
      continue;
    }
    detail::AlignedText stretch =
        detail::AlignedText::verbatim(text.substr(split.span.begin, split.span.end - split.span.begin), split.span.begin, track);
    if (normalizer) normalizer->normalize(stretch);
    const bool starts_input = split.span.begin == 0;
    if (!added.has_normalized_tokens()) {
      encode_stretch(*this, std::move(stretch), starts_input, scratch, sink);
      continue;
    }
    normalized_splits.clear();
    added.split(stretch.text, true, normalized_splits);
    for (const detail::TextSplit& inner : normalized_splits) {
      if (inner.token_id >= 0) {
        sink.add(inner.token_id, track ? stretch.span(inner.span.begin, inner.span.end) : detail::ByteSpan{});
        continue;
      }
      detail::AlignedTextBuilder part(stretch);
      part.copy(inner.span.begin, inner.span.end);
      encode_stretch(*this, part.finish(), starts_input && inner.span.begin == 0, scratch, sink);
    }
  }
  if (add_special_tokens)
    for (int32_t id : frame.after) sink.add(id, {});
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_directory(const std::string& dir) { return Tokenizer(Impl::load(dir)); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (detail::is_valid_utf8(text)) {
    impl_->encode(text, add_special_tokens, ids, nullptr);
  } else {
    impl_->encode(detail::repair_utf8(text), add_special_tokens, ids, nullptr);
  }
  return ids;
}

TokenizedText Tokenizer::encode_with_offsets(std::string_view text, bool add_special_tokens) const {
  // Invalid UTF-8 is repaired first; the offsets into the repaired text are then mapped back to `text`.
  TokenizedText out;
  if (detail::is_valid_utf8(text)) {
    impl_->encode(text, add_special_tokens, out.ids, &out.offsets);
  } else {
    detail::RepairedOffsets repaired;
    impl_->encode(detail::repair_utf8(text, &repaired), add_special_tokens, out.ids, &out.offsets);
    for (auto& [begin, end] : out.offsets) {
      const bool empty = begin == end;  // post-processor tokens and empty ranges stay empty
      begin = repaired.begin[begin];
      end = empty ? begin : repaired.end[end];
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> out(texts.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (size_t i = 0; i < texts.size(); ++i) out[i] = encode(texts[i], add_special_tokens);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const detail::AddedToken* added_token = impl_->added.by_id(id);
    const std::string* token = added_token ? &added_token->content : impl_->model->id_to_token(id);
    if (token == nullptr) continue;
    if (skip_special_tokens) {
      const detail::AddedToken* as_added = added_token ? added_token : impl_->added.by_content(*token);
      if (as_added && as_added->special) continue;
    }
    tokens.push_back(*token);
  }
  return detail::run_decoder(impl_->decoder.get(), std::move(tokens));
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const detail::AddedToken* added_token = impl_->added.by_id(id)) return added_token->content;
  if (const std::string* token = impl_->model->id_to_token(id)) return *token;
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const int32_t id = impl_->token_to_id(token);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  const detail::AddedToken* added_token = impl_->added.by_id(id);
  return added_token != nullptr && added_token->special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->id_of(impl_->bos_token); }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->id_of(impl_->eos_token); }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->id_of(impl_->pad_token); }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->id_of(impl_->unk_token); }
std::optional<std::string> Tokenizer::eos_token() const { return impl_->eos_token; }
std::optional<std::string> Tokenizer::pad_token() const { return impl_->pad_token; }
void Tokenizer::set_eos_token(std::string token) { impl_->eos_token = std::move(token); }
void Tokenizer::set_pad_token(std::string token) { impl_->pad_token = std::move(token); }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace trlhpc::tokenizer
