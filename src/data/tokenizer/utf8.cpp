#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {
// Length of the well-formed sequence at p (Unicode Table 3-7), or 0 when it is ill-formed; for an
// ill-formed one `maximal_subpart` is the length of the longest prefix that could have started a
// well-formed sequence (at least 1), which is what gets replaced by one U+FFFD.
size_t well_formed_length(const unsigned char* p, size_t available, size_t& maximal_subpart) {
  maximal_subpart = 1;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= available) return 0;
    const unsigned char lower = i == 1 ? lo : 0x80, upper = i == 1 ? hi : 0xBF;
    if (p[i] < lower || p[i] > upper) return 0;
    maximal_subpart = i + 1;
  }
  return need;
}
}  // namespace

bool is_valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      __builtin_memcpy(&word, p + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t subpart;
    const size_t length = well_formed_length(p + i, n - i, subpart);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string repair_utf8(std::string_view text, RepairedOffsets* offsets) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  std::string out;
  out.reserve(n + 8);
  if (offsets) {
    offsets->begin.clear();
    offsets->end.clear();
  }
  size_t i = 0;
  while (i < n) {
    size_t subpart;
    const size_t length = well_formed_length(p + i, n - i, subpart);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      if (offsets) {  // a range may start at the U+FFFD's first byte only; one ending inside it takes all of it
        offsets->begin.insert(offsets->begin.end(), {i, i, i});
        offsets->end.insert(offsets->end.end(), {i, i + subpart, i + subpart});
      }
      i += subpart;
    } else {
      out.append(text.data() + i, length);
      if (offsets)
        for (size_t k = 0; k < length; ++k) {
          offsets->begin.push_back(i + k);
          offsets->end.push_back(i + k);
        }
      i += length;
    }
  }
  if (offsets) {
    offsets->begin.push_back(n);
    offsets->end.push_back(n);
  }
  return out;
}

}  // namespace trlhpc::tokenizer::detail
