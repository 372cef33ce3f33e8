#pragma once
// Canonical Unicode normalization, NFC and NFD (UAX #15), as the NFC/NFD normalizers of the
// `tokenizers` library apply it.
//
// Correct for every code point of the generated tables (the Unicode version of the Python that
// generated them, see unicode_tables.hpp): full canonical decomposition, canonical
// ordering by combining class, canonical composition with composition exclusions, and algorithmic
// Hangul. Fast path: the text is scanned with the quick-check property (a code point is "stable"
// when it has combining class 0 and NFC/NFD_Quick_Check=Yes; everything below U+0300 is); text
// without unstable code points is returned untouched, and otherwise only the stretches from the
// stable code point before an unstable one up to the next stable one are rewritten.
#include "aligned_text.hpp"

namespace trlhpc::tokenizer::detail {

enum class NormalizationForm { NFC, NFD };

// Normalizes `text` in place, keeping its alignment (a rewritten stretch maps to its input range).
void normalize_canonical(NormalizationForm form, AlignedText& text);

}  // namespace trlhpc::tokenizer::detail
