#pragma once
// Unicode Character Database tables for canonical normalization, generated into
// unicode_decompositions.cpp and unicode_combining_classes.cpp by
// tests/fixtures/make_tokenizer_unicode_tables.py (from Python's unicodedata).
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace trlhpc::tokenizer::detail {

// One canonical Decomposition_Mapping of UnicodeData.txt (one level; second == 0 for a singleton).
// composes: the pair is a primary composite, i.e. NFC composes first+second back into code_point.
struct CanonicalDecomposition {
  char32_t code_point;
  char32_t first;
  char32_t second;
  uint8_t composes;
};
// Sorted by code_point; Hangul syllables are excluded (handled algorithmically).
extern const CanonicalDecomposition kCanonicalDecompositions[];
extern const size_t kCanonicalDecompositionCount;

// Code points first..last have Canonical_Combining_Class combining_class (non-zero); sorted.
struct CombiningClassRange {
  char32_t first;
  char32_t last;
  uint8_t combining_class;
};
extern const CombiningClassRange kCombiningClassRanges[];
extern const size_t kCombiningClassRangeCount;

}  // namespace trlhpc::tokenizer::detail
