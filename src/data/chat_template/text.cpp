// Python str semantics on UTF-8 text (see text.hpp).
#include "trlhpc/data/chat_template/text.hpp"

#include <algorithm>

#include "trlhpc/data/chat_template/value.hpp"

namespace trlhpc::chat_template {

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    char32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
    bool ok = extra >= 0;
    for (int k = 1; ok && k <= extra; ++k) {
      if (i + static_cast<size_t>(k) >= n || (p[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF, as Python's strict decoder does.
    if (ok && ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF))
      ok = false;
    if (!ok) {
      out.push_back(0xDC00 + c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {  // an escaped invalid byte
    out.push_back(static_cast<char>(cp - 0xDC00));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8_append(out, cp);
  return out;
}

size_t utf8_length(const std::string& s) { return utf8_decode(s).size(); }

bool python_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Python's str.isprintable() is false for categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than ' '.
// This covers the control, format, separator, surrogate and private-use ranges; unassigned code points
// (Cn) need the Unicode database and count as printable here.
bool python_isprintable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x1680 || cp == 0x180E)
    return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
      (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000)
    return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE ||
      cp == 0xFFFF)
    return false;
  if (cp == 0x110BD || (cp >= 0x1D173 && cp <= 0x1D17A) || cp == 0xE0001 || (cp >= 0xE0020 && cp <= 0xE007F) ||
      cp >= 0xF0000)
    return false;
  return true;
}

namespace {
// Ranges where upper and lower case alternate (even code point upper, odd lower, or the reverse).
bool alternating_pair(char32_t cp, bool& is_upper) {
  auto even_upper = [&](char32_t lo, char32_t hi) {
    if (cp < lo || cp > hi) return false;
    is_upper = (cp % 2) == (lo % 2);
    return true;
  };
  return even_upper(0x100, 0x12F) || even_upper(0x132, 0x137) || even_upper(0x139, 0x148) ||
         even_upper(0x14A, 0x177) || even_upper(0x179, 0x17E) || even_upper(0x460, 0x481) ||
         even_upper(0x48A, 0x4BF) || even_upper(0x4D0, 0x52F);
}
}  // namespace

char32_t to_upper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 0x20;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp == 0x131) return 'I';
  if (cp == 0x17F) return 'S';
  bool is_upper = false;
  if (alternating_pair(cp, is_upper)) return is_upper ? cp : cp - 1;
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 0x20;
  if (cp == 0x3C2) return 0x3A3;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 0x25;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
  return cp;
}

char32_t to_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 0x20;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x130) return 'i';
  bool is_upper = false;
  if (alternating_pair(cp, is_upper)) return is_upper ? cp + 1 : cp;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  return cp;
}

bool is_cased_letter(char32_t cp) {
  return to_upper(cp) != cp || to_lower(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149;
}

namespace {
// Appends the upper-case form; U+00DF (sharp s) upper-cases to "SS" as in Python.
void append_upper(std::u32string& out, char32_t cp) {
  if (cp == 0xDF) {
    out += U"SS";
  } else {
    out.push_back(to_upper(cp));
  }
}
}  // namespace

std::string python_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string text = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : python_isspace(cp); };
  size_t begin = 0, end = text.size();
  if (left)
    while (begin < end && strippable(text[begin])) ++begin;
  if (right)
    while (end > begin && strippable(text[end - 1])) --end;
  return utf8_encode(text.substr(begin, end - begin));
}

std::vector<std::string> python_split(const std::string& s, const std::optional<std::string>& sep,
                                      int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    parts.push_back(s.substr(pos));
    return parts;
  }
  const std::u32string text = utf8_decode(s);
  size_t i = 0;
  const size_t n = text.size();
  while (true) {
    while (i < n && python_isspace(text[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = n;
      while (end > i && python_isspace(text[end - 1])) --end;
      parts.push_back(utf8_encode(text.substr(i, end - i)));
      break;
    }
    size_t j = i;
    while (j < n && !python_isspace(text[j])) ++j;
    parts.push_back(utf8_encode(text.substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::string python_replace(const std::string& s, const std::string& old, const std::string& replacement,
                           int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::u32string text = utf8_decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
        check_string_size(out.size());
      }
      if (i < text.size()) utf8_append(out, text[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += replacement;
    check_string_size(out.size());
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::string python_upper(const std::string& s) {
  std::u32string out;
  for (char32_t cp : utf8_decode(s)) append_upper(out, cp);
  return utf8_encode(out);
}

std::string python_lower(const std::string& s) {
  std::u32string text = utf8_decode(s);
  for (char32_t& cp : text) cp = to_lower(cp);
  return utf8_encode(text);
}

std::string python_title(const std::string& s) {
  std::u32string out;
  bool previous_is_cased = false;
  for (char32_t cp : utf8_decode(s)) {
    if (previous_is_cased) out.push_back(to_lower(cp));
    else if (cp == 0xDF) out += U"Ss";
    else out.push_back(to_upper(cp));
    previous_is_cased = is_cased_letter(cp);
  }
  return utf8_encode(out);
}

std::string python_capitalize(const std::string& s) {
  std::u32string text = utf8_decode(s), out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0) {
      if (text[i] == 0xDF) out += U"Ss";
      else out.push_back(to_upper(text[i]));
    } else {
      out.push_back(to_lower(text[i]));
    }
  }
  return utf8_encode(out);
}

std::string jinja_title(const std::string& s) {
  // jinja2.filters.do_title: re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower().
  auto is_separator = [](char32_t cp) {
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || python_isspace(cp);
  };
  std::u32string out;
  bool word_start = true;
  for (char32_t cp : utf8_decode(s)) {
    if (is_separator(cp)) {
      out.push_back(cp);
      word_start = true;
    } else if (word_start) {
      append_upper(out, cp);
      word_start = false;
    } else {
      out.push_back(to_lower(cp));
    }
  }
  return utf8_encode(out);
}

std::vector<int64_t> python_slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                          std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  auto adjust = [&](std::optional<int64_t> index, int64_t fallback) {
    if (!index) return fallback;
    int64_t i = *index;
    if (i < 0) {
      i += length;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= length) {
      i = st < 0 ? length - 1 : length;
    }
    return i;
  };
  const int64_t first = adjust(start, st < 0 ? length - 1 : 0);
  const int64_t last = adjust(stop, st < 0 ? -1 : length);
  std::vector<int64_t> indices;
  // A step near the int64 range must stop the walk rather than wrap around (x[1::9223372036854775807]).
  for (int64_t i = first; st > 0 ? i < last : i > last;) {
    indices.push_back(i);
    if (__builtin_add_overflow(i, st, &i)) break;
  }
  return indices;
}

}  // namespace trlhpc::chat_template
