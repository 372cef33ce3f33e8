#include "unicode_normalization.hpp"

#include <algorithm>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "unicode_tables.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// Hangul syllable arithmetic (Unicode 15, section 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Every code point with a decomposition, a combining class or a composition role is below this.
constexpr char32_t kUnstableLimit = 0x30000;

struct NormalizationTables {
  std::vector<uint64_t> nfc_unstable;  // bitmap over [0, kUnstableLimit)
  std::vector<uint64_t> nfd_unstable;
  std::unordered_map<uint64_t, char32_t> compositions;  // (first << 32 | second) -> primary composite
};

void mark(std::vector<uint64_t>& bits, char32_t c) {
  TRLHPC_ASSERT(c < kUnstableLimit, "Unicode table code point above the quick-check bitmap");
  bits[c >> 6] |= uint64_t{1} << (c & 63);
}

NormalizationTables build_tables() {
  NormalizationTables t;
  t.nfc_unstable.assign(kUnstableLimit / 64, 0);
  t.nfd_unstable.assign(kUnstableLimit / 64, 0);
  for (size_t i = 0; i < kCombiningClassRangeCount; ++i) {
    for (char32_t c = kCombiningClassRanges[i].first; c <= kCombiningClassRanges[i].last; ++c) {
      mark(t.nfc_unstable, c);
      mark(t.nfd_unstable, c);
    }
  }
  for (size_t i = 0; i < kCanonicalDecompositionCount; ++i) {
    const CanonicalDecomposition& d = kCanonicalDecompositions[i];
    mark(t.nfd_unstable, d.code_point);
    if (d.composes) {
      t.compositions.emplace((uint64_t{d.first} << 32) | d.second, d.code_point);
      mark(t.nfc_unstable, d.second);  // NFC_Quick_Check=Maybe: may compose with what precedes it
    } else {
      mark(t.nfc_unstable, d.code_point);  // NFC_Quick_Check=No: never survives NFC
    }
  }
  for (char32_t c = kVBase; c < kVBase + kVCount; ++c) mark(t.nfc_unstable, c);
  for (char32_t c = kTBase + 1; c < kTBase + kTCount; ++c) mark(t.nfc_unstable, c);
  for (char32_t c = kSBase; c < kSBase + kSCount; ++c) mark(t.nfd_unstable, c);
  return t;
}

const NormalizationTables& tables() {
  static const NormalizationTables instance = build_tables();
  return instance;
}

bool is_unstable(const std::vector<uint64_t>& bits, char32_t c) {
  return c < kUnstableLimit && ((bits[c >> 6] >> (c & 63)) & 1);
}

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const CombiningClassRange* begin = kCombiningClassRanges;
  const CombiningClassRange* end = kCombiningClassRanges + kCombiningClassRangeCount;
  const auto* it = std::upper_bound(begin, end, c, [](char32_t v, const CombiningClassRange& r) { return v < r.first; });
  if (it == begin) return 0;
  --it;
  return c <= it->last ? it->combining_class : 0;
}

void decompose(char32_t c, std::u32string& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const CanonicalDecomposition* begin = kCanonicalDecompositions;
  const CanonicalDecomposition* end = kCanonicalDecompositions + kCanonicalDecompositionCount;
  const auto* it = std::lower_bound(begin, end, c,
                                    [](const CanonicalDecomposition& d, char32_t v) { return d.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back(c);
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// Primary composite of (first, second), or 0.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  const auto& map = tables().compositions;
  const auto it = map.find((uint64_t{first} << 32) | second);
  return it == map.end() ? 0 : it->second;
}

// Normalizes one stretch of code points (decompose, order, optionally compose) into UTF-8.
void normalize_stretch(NormalizationForm form, std::string_view stretch, std::string& out) {
  std::u32string chars;
  for (size_t pos = 0; pos < stretch.size();) {
    size_t length;
    decompose(decode_utf8(stretch, pos, length), chars);
    pos += length;
  }
  // Canonical ordering: each run of non-starters stably sorted by combining class.
  std::vector<uint8_t> classes(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) classes[i] = combining_class(chars[i]);
  std::vector<std::pair<uint8_t, char32_t>> run;
  for (size_t begin = 0; begin < chars.size();) {
    if (classes[begin] == 0) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < chars.size() && classes[end] != 0) ++end;
    if (end - begin > 1) {
      run.clear();
      for (size_t i = begin; i < end; ++i) run.emplace_back(classes[i], chars[i]);
      std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t i = begin; i < end; ++i) std::tie(classes[i], chars[i]) = run[i - begin];
    }
    begin = end;
  }
  if (form == NormalizationForm::NFC && !chars.empty()) {
    // Canonical composition: a character composes with the last starter unless something between
    // them blocks it (a starter, or a non-starter of equal or higher class). Since what lies between
    // is in canonical order, only the character just before needs checking.
    std::u32string composed;
    std::vector<uint8_t> composed_classes;
    long starter = -1;
    for (size_t i = 0; i < chars.size(); ++i) {
      const uint8_t cc = classes[i];
      if (starter >= 0) {
        const bool adjacent = composed.size() == static_cast<size_t>(starter) + 1;
        if (adjacent || composed_classes.back() < cc) {
          const char32_t c = compose_pair(composed[static_cast<size_t>(starter)], chars[i]);
          if (c != 0) {
            composed[static_cast<size_t>(starter)] = c;
            continue;
          }
        }
      }
      if (cc == 0) starter = static_cast<long>(composed.size());
      composed.push_back(chars[i]);
      composed_classes.push_back(cc);
    }
    chars.swap(composed);
  }
  for (char32_t c : chars) append_utf8(out, c);
}

// Byte offset of the first unstable code point at or after `from`, or npos.
size_t find_unstable(std::string_view text, size_t from, const std::vector<uint64_t>& bits) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i < text.size(); ++i) {
    if (p[i] < 0xCC) continue;  // ASCII, a continuation byte, or a lead byte below U+0300
    size_t length;
    if (is_unstable(bits, decode_utf8(text, i, length))) return i;
    i += length - 1;
  }
  return std::string_view::npos;
}

}  // namespace

void normalize_canonical(NormalizationForm form, AlignedText& text) {
  const NormalizationTables& t = tables();
  const std::vector<uint64_t>& bits = form == NormalizationForm::NFC ? t.nfc_unstable : t.nfd_unstable;
  const std::string_view input = text.text;
  size_t unstable = find_unstable(input, 0, bits);
  if (unstable == std::string_view::npos) return;

  AlignedTextBuilder out(text);
  size_t copied = 0;
  std::string rewritten;
  while (unstable != std::string_view::npos) {
    // The stretch starts at the stable code point before the unstable one (if any)...
    size_t begin = unstable;
    if (begin > copied) {
      do --begin;
      while (begin > copied && (static_cast<unsigned char>(input[begin]) & 0xC0) == 0x80);
    }
    // ...and runs to the next stable code point.
    size_t end = unstable;
    while (end < input.size()) {
      size_t length;
      const char32_t c = decode_utf8(input, end, length);
      if (end > unstable && !is_unstable(bits, c)) break;
      end += length;
    }
    out.copy(copied, begin);
    rewritten.clear();
    normalize_stretch(form, input.substr(begin, end - begin), rewritten);
    out.replace(begin, end, rewritten);
    copied = end;
    unstable = find_unstable(input, end, bits);
  }
  out.copy(copied, input.size());
  text = out.finish();
}

}  // namespace trlhpc::tokenizer::detail
