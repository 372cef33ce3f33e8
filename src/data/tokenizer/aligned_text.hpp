#pragma once
// Text moving through the tokenizer pipeline, optionally aligned byte by byte to the input so that
// encode_with_offsets can say where each token came from.
//
// Alignment follows the library's NormalizedString: every byte of the normalized text carries the
// [begin, end) bytes of the input it was produced from. Copied bytes keep their own range; bytes a
// normalizer produces (NFC composition, Replace) carry the whole input range they replace; inserted
// bytes (Prepend, Metaspace's "▁", ByteLevel's prefix space) carry the range of the byte they precede.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trlhpc::tokenizer::detail {

struct ByteSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct AlignedText {
  std::string text;
  std::vector<ByteSpan> origin;  // (text.size()) when tracked, else empty
  bool tracked = false;

  // `text` taken verbatim from the input starting at byte `input_begin`.
  static AlignedText verbatim(std::string_view text, size_t input_begin, bool track) {
    AlignedText out{std::string(text), {}, track};
    if (track) {
      out.origin.resize(text.size());
      for (size_t i = 0; i < text.size(); ++i)
        out.origin[i] = {static_cast<uint32_t>(input_begin + i), static_cast<uint32_t>(input_begin + i + 1)};
    }
    return out;
  }

  // Input range covered by text bytes [from, to) (from < to).
  ByteSpan span(size_t from, size_t to) const { return {origin[from].begin, origin[to - 1].end}; }
};

// Builds a new AlignedText from pieces of an old one and inserted bytes.
class AlignedTextBuilder {
 public:
  explicit AlignedTextBuilder(const AlignedText& source) : source_(source) {
    out_.tracked = source.tracked;
    out_.text.reserve(source.text.size() + 8);
    if (out_.tracked) out_.origin.reserve(source.text.size() + 8);
  }

  // Source bytes [from, to) with their own alignment.
  void copy(size_t from, size_t to) {
    out_.text.append(source_.text, from, to - from);
    if (out_.tracked) out_.origin.insert(out_.origin.end(), source_.origin.begin() + from, source_.origin.begin() + to);
  }
  // New bytes, each aligned to `span`.
  void insert(std::string_view bytes, ByteSpan span) {
    out_.text.append(bytes);
    if (out_.tracked) out_.origin.insert(out_.origin.end(), bytes.size(), span);
  }
  // New bytes replacing source bytes [from, to): aligned to their whole input range.
  void replace(size_t from, size_t to, std::string_view bytes) {
    insert(bytes, out_.tracked && from < to ? source_.span(from, to) : ByteSpan{});
  }
  // Alignment for bytes inserted before source byte `at` (or after the end).
  ByteSpan span_before(size_t at) const {
    if (!out_.tracked || source_.origin.empty()) return {};
    if (at < source_.origin.size()) return source_.origin[at];
    const ByteSpan last = source_.origin.back();
    return {last.end, last.end};
  }
  size_t size() const { return out_.text.size(); }
  AlignedText finish() { return std::move(out_); }

 private:
  const AlignedText& source_;
  AlignedText out_;
};

}  // namespace trlhpc::tokenizer::detail
