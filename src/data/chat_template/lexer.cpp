// Chat-template lexer (rules in lexer.hpp; reference: jinja2/lexer.py, Lexer.tokeniter).
#include "trlhpc/data/chat_template/lexer.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

std::string template_location(int line, int column) {
  return "chat template line " + std::to_string(line) + ", column " + std::to_string(column);
}

void throw_template_error(int line, int column, const std::string& message) {
  throw UserError(template_location(line, column) + ": " + message);
}

namespace {

// jinja2 splits on \r\n, \r and \n, drops one trailing newline (keep_trailing_newline=False) and joins
// with \n.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit(TokenKind::Text, src_.substr(pos_), pos_);
        break;
      }
      const char kind = src_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::string text = src_.substr(pos_, tag - pos_);
      strip_before_tag(text, sign, /*lstrip_allowed=*/kind != '{');
      if (!text.empty()) emit(TokenKind::Text, std::move(text), pos_);
      size_t raw_body = 0;
      if (kind == '#') lex_comment(tag, after);
      else if (kind == '%' && match_raw_begin(after, raw_body)) lex_raw(tag, raw_body);
      else lex_tag(tag, after, kind == '%');
    }
    Token end{TokenKind::End, "", 0, 0};
    locate(end, src_.size());
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  // Tokens are located in increasing offset order, so the column count continues from the previous
  // token on the same line instead of rescanning the line (which made long lines quadratic).
  void locate(Token& t, size_t offset) {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    t.line = static_cast<int>(it - line_starts_.begin()) + 1;
    if (t.line != located_line_ || offset < located_offset_) {
      located_line_ = t.line;
      located_offset_ = *it;
      located_column_ = 1;
    }
    for (size_t i = located_offset_; i < offset && i < src_.size(); ++i)
      if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) ++located_column_;
    located_offset_ = std::max(located_offset_, offset);
    t.column = located_column_;
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) {
    Token t{TokenKind::End, "", 0, 0};
    locate(t, offset);
    throw_template_error(t.line, t.column, message);
  }

  void emit(TokenKind kind, std::string value, size_t offset) {
    Token t{kind, std::move(value), 0, 0};
    locate(t, offset);
    tokens_.push_back(std::move(t));
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // Python's \s at a byte offset: the length of the whitespace code point there, or 0.
  size_t whitespace_at(size_t offset) const {
    if (offset >= src_.size()) return 0;
    const unsigned char c = static_cast<unsigned char>(src_[offset]);
    if (c < 0x80) return python_isspace(c) ? 1 : 0;
    const size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    const std::u32string cp = utf8_decode(src_.substr(offset, len));
    return (cp.size() == 1 && python_isspace(cp[0])) ? len : 0;
  }

  size_t skip_whitespace(size_t offset) const {
    while (size_t w = whitespace_at(offset)) offset += w;
    return offset;
  }

  // The text before a tag: `-` strips all trailing whitespace; otherwise lstrip_blocks removes the
  // indentation of a tag that starts its line.
  void strip_before_tag(std::string& text, char sign, bool lstrip_allowed) const {
    if (sign == '-') {
      text = python_strip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip_allowed) {
      const size_t newline = text.rfind('\n');
      const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
      if ((line_begin > 0 || line_starting_) && line_begin < text.size()) {
        const std::u32string tail = utf8_decode(text.substr(line_begin));
        if (std::all_of(tail.begin(), tail.end(), python_isspace)) text.resize(line_begin);
      }
    }
  }

  // Block/comment end with trim_blocks: "+X}" keeps what follows, "-X}" eats all whitespace, "X}" eats
  // one newline. Returns the offset after the end marker; `marker` points at X.
  size_t consume_block_end(size_t marker, char sign) {
    size_t end = marker + 2;
    if (sign == '-') end = skip_whitespace(end);
    else if (sign != '+' && end < src_.size() && src_[end] == '\n') ++end;
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    return end;
  }

  void lex_comment(size_t tag, size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) fail(tag, "unterminated comment: '{#' has no matching '#}'");
    char sign = 0;
    if (close > body && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    pos_ = consume_block_end(close, sign);
  }

  bool match_raw_begin(size_t after, size_t& body) const {
    size_t p = skip_whitespace(after);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_whitespace(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      body = skip_whitespace(p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      body = p + 2;
      return true;
    }
    return false;
  }

  void lex_raw(size_t tag, size_t body) {
    line_starting_ = body > 0 && src_[body - 1] == '\n';
    for (size_t open = src_.find("{%", body); open != std::string::npos; open = src_.find("{%", open + 1)) {
      size_t p = open + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_whitespace(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_whitespace(p + 6);
      char end_sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, open - body);
      strip_before_tag(text, sign, true);
      if (!text.empty()) emit(TokenKind::Text, std::move(text), body);
      pos_ = consume_block_end(p, end_sign);
      return;
    }
    fail(tag, "unterminated raw block: '{% raw %}' has no matching '{% endraw %}'");
  }

  void lex_tag(size_t tag, size_t p, bool is_block) {
    emit(is_block ? TokenKind::BlockBegin : TokenKind::VariableBegin, is_block ? "{%" : "{{", tag);
    std::string balancing;  // closing brackets still expected
    while (true) {
      if (p >= src_.size())
        fail(tag, std::string("unexpected end of template: this '") + (is_block ? "{%" : "{{") +
                      "' is never closed with '" + (is_block ? "%}" : "}}") + "'");
      if (balancing.empty() && match_tag_end(p, is_block)) return;
      if (size_t w = whitespace_at(p)) {
        p += w;
      } else if (is_digit(src_[p])) {
        p = lex_number(p);
      } else if (is_name_start(src_[p])) {
        size_t q = p;
        while (q < src_.size() && is_name_char(src_[q])) ++q;
        emit(TokenKind::Name, src_.substr(p, q - p), p);
        p = q;
      } else if (src_[p] == '\'' || src_[p] == '"') {
        p = lex_string(p);
      } else {
        p = lex_operator(p, balancing);
      }
    }
  }

  bool match_tag_end(size_t p, bool is_block) {
    const char close = is_block ? '%' : '}';
    size_t end = 0;
    if (is_block && src_.compare(p, 3, "+%}") == 0) end = consume_block_end(p + 1, '+');
    else if (src_.compare(p, 3, std::string("-") + close + "}") == 0)
      end = is_block ? consume_block_end(p + 1, '-') : skip_whitespace(p + 3);
    else if (src_.compare(p, 2, std::string(1, close) + "}") == 0) end = is_block ? consume_block_end(p, 0) : p + 2;
    else return false;
    if (!is_block) line_starting_ = src_[end - 1] == '\n';
    emit(is_block ? TokenKind::BlockEnd : TokenKind::VariableEnd, is_block ? "%}" : "}}", p);
    pos_ = end;
    return true;
  }

  // (\d+_)*\d+ at p: the end offset, or p when nothing matches.
  size_t match_digit_run(size_t p) const {
    size_t q = p, last_good = p;
    while (q < src_.size() && is_digit(src_[q])) {
      while (q < src_.size() && is_digit(src_[q])) ++q;
      last_good = q;
      if (q + 1 < src_.size() && src_[q] == '_' && is_digit(src_[q + 1])) ++q;
      else break;
    }
    return last_good;
  }

  size_t match_exponent(size_t p) const {
    if (p >= src_.size() || (src_[p] != 'e' && src_[p] != 'E')) return p;
    size_t q = p + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    const size_t end = match_digit_run(q);
    return end == q ? p : end;
  }

  size_t lex_number(size_t p) {
    auto strip_underscores = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    const bool after_dot = p > 0 && src_[p - 1] == '.';
    const size_t whole = match_digit_run(p);
    size_t float_end = 0;
    if (!after_dot) {
      size_t fraction = 0;
      if (whole < src_.size() && src_[whole] == '.') {
        const size_t f = match_digit_run(whole + 1);
        if (f > whole + 1) fraction = f;
      }
      if (fraction && match_exponent(fraction) > fraction) float_end = match_exponent(fraction);
      else if (match_exponent(whole) > whole) float_end = match_exponent(whole);
      else if (fraction) float_end = fraction;
    }
    if (float_end) {
      emit(TokenKind::Float, strip_underscores(src_.substr(p, float_end - p)), p);
      return float_end;
    }
    // Integers: 0b / 0o / 0x prefixes, decimal, or a run of zeros.
    size_t q = p;
    int base = 10;
    if (src_[p] == '0' && p + 1 < src_.size() && std::string("bBoOxX").find(src_[p + 1]) != std::string::npos) {
      const char prefix = static_cast<char>(src_[p + 1] | 0x20);
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      auto digit_ok = [&](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      };
      q = p + 2;
      while (q < src_.size() && (digit_ok(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && digit_ok(src_[q + 1]))))
        ++q;
      if (q == p + 2) fail(p, "invalid integer literal");
    } else if (src_[p] == '0') {
      while (q < src_.size() && (src_[q] == '0' || (src_[q] == '_' && q + 1 < src_.size() && src_[q + 1] == '0'))) ++q;
    } else {
      q = whole;
    }
    std::string digits = strip_underscores(src_.substr(p, q - p));
    if (base != 10) {
      errno = 0;
      const long long value = std::strtoll(digits.c_str() + 2, nullptr, base);
      if (errno == ERANGE) fail(p, "integer literal does not fit in 64 bits (trlhpc's chat-template integers are 64-bit)");
      digits = std::to_string(value);
    }
    emit(TokenKind::Integer, digits, p);
    return q;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string value;
    size_t q = p + 1;
    while (q < src_.size() && src_[q] != quote) {
      if (src_[q] != '\\') {
        value.push_back(src_[q++]);
        continue;
      }
      if (q + 1 >= src_.size()) break;
      q = unescape(q, value);
    }
    if (q >= src_.size()) fail(p, std::string("unterminated string literal starting with ") + quote);
    emit(TokenKind::String, std::move(value), p);
    return q + 1;
  }

  // One backslash escape at q (Python's unicode-escape codec); returns the offset after it.
  size_t unescape(size_t q, std::string& out) {
    const char c = src_[q + 1];
    auto hex_escape = [&](size_t digits) {
      if (q + 2 + digits > src_.size()) fail(q, "truncated \\x/\\u/\\U escape in string literal");
      const std::string hex = src_.substr(q + 2, digits);
      if (!std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
        fail(q, "truncated \\x/\\u/\\U escape in string literal");
      utf8_append(out, static_cast<char32_t>(std::strtoul(hex.c_str(), nullptr, 16)));
      return q + 2 + digits;
    };
    switch (c) {
      case '\n': return q + 2;
      case '\\': out.push_back('\\'); return q + 2;
      case '\'': out.push_back('\''); return q + 2;
      case '"': out.push_back('"'); return q + 2;
      case 'a': out.push_back('\a'); return q + 2;
      case 'b': out.push_back('\b'); return q + 2;
      case 'f': out.push_back('\f'); return q + 2;
      case 'n': out.push_back('\n'); return q + 2;
      case 'r': out.push_back('\r'); return q + 2;
      case 't': out.push_back('\t'); return q + 2;
      case 'v': out.push_back('\v'); return q + 2;
      case 'x': return hex_escape(2);
      case 'u': return hex_escape(4);
      case 'U': return hex_escape(8);
      case 'N': fail(q, "\\N{...} escapes in string literals are not supported");
      default: break;
    }
    if (c >= '0' && c <= '7') {
      size_t r = q + 1;
      unsigned value = 0;
      while (r < src_.size() && r < q + 4 && src_[r] >= '0' && src_[r] <= '7') value = value * 8 + (src_[r++] - '0');
      utf8_append(out, static_cast<char32_t>(value));
      return r;
    }
    out.push_back('\\');  // unknown escapes stay as written
    return q + 1;
  }

  size_t lex_operator(size_t p, std::string& balancing) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(p, 2, op) == 0) {
        emit(TokenKind::Operator, op, p);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::string("+-/*%~[](){}><=.:|,;").find(c) == std::string::npos)
      fail(p, std::string("unexpected character '") + utf8_encode(utf8_decode(src_.substr(p, 4)).substr(0, 1)) +
                  "' in a tag");
    if (c == '(') balancing.push_back(')');
    if (c == '[') balancing.push_back(']');
    if (c == '{') balancing.push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balancing.empty()) fail(p, std::string("unexpected '") + c + "'");
      if (balancing.back() != c) fail(p, std::string("unexpected '") + c + "', expected '" + balancing.back() + "'");
      balancing.pop_back();
    }
    emit(TokenKind::Operator, std::string(1, c), p);
    return p + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  int located_line_ = 0;       // locate()'s cursor: the column of byte located_offset_ on located_line_
  size_t located_offset_ = 0;
  int located_column_ = 1;
};

}  // namespace

std::vector<Token> tokenize_template(const std::string& source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace trlhpc::chat_template
