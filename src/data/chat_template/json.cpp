// Python's json.dumps for template values, byte for byte (json/encoder.py: separators, indent layout,
// float repr, the escape table of py_encode_basestring / py_encode_basestring_ascii).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

namespace {

void append_u_escape(std::string& out, unsigned code) {
  char escape[16];
  std::snprintf(escape, sizeof escape, "\\u%04x", code);
  out += escape;
}

void encode_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20) {
      append_u_escape(out, cp);
    } else if (ensure_ascii && cp > 0x7E) {
      if (cp >= 0x10000) {  // UTF-16 surrogate pair
        const unsigned v = cp - 0x10000;
        append_u_escape(out, 0xD800 | (v >> 10));
        append_u_escape(out, 0xDC00 | (v & 0x3FF));
      } else {
        append_u_escape(out, cp);
      }
    } else {
      utf8_append(out, cp);
    }
  }
  out.push_back('"');
}

std::string float_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return python_float_repr(d);
}

// Dict keys become strings the way json.dumps converts them.
std::string key_text(const Value& key) {
  switch (key.kind()) {
    case Kind::String: return key.as_string();
    case Kind::Float: return float_text(key.as_float());
    case Kind::Bool: return key.as_bool() ? "true" : "false";
    case Kind::None: return "null";
    case Kind::Int: return std::to_string(key.as_int());
    default: throw EvalError("keys must be str, int, float, bool or None, not " + key.type_name());
  }
}

class Encoder {
 public:
  explicit Encoder(const JsonDumpOptions& options) : options_(options) {}

  void encode(std::string& out, const Value& v, int level) {
    switch (v.kind()) {
      case Kind::None: out += "null"; return;
      case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out += std::to_string(v.as_int()); return;
      case Kind::Float: out += float_text(v.as_float()); return;
      case Kind::String: encode_string(out, v.as_string(), options_.ensure_ascii); return;
      case Kind::List: encode_list(out, v.as_list().items, level); return;
      case Kind::Dict: encode_dict(out, v.as_dict(), level); return;
      default: throw EvalError("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }

 private:
  // Opens a container: returns the separator between items and appends the first newline+indent.
  std::string open(std::string& out, char bracket, int level) {
    out.push_back(bracket);
    if (!options_.has_indent) return options_.item_separator;
    std::string newline_indent(1, '\n');
    newline_indent += repeat_indent(level + 1);
    out += newline_indent;
    return options_.item_separator + newline_indent;
  }

  void close(std::string& out, char bracket, int level) {
    if (options_.has_indent) {
      out.push_back('\n');
      out += repeat_indent(level);
    }
    out.push_back(bracket);
  }

  std::string repeat_indent(int level) const {
    std::string s;
    for (int i = 0; i < level; ++i) s += options_.indent;
    return s;
  }

  void encode_list(std::string& out, const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    const std::string separator = open(out, '[', level);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += separator;
      encode(out, items[i], level + 1);
      check_string_size(out.size());
    }
    close(out, ']', level);
  }

  void encode_dict(std::string& out, const Dict& d, int level) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& item : d.items) items.push_back(&item);
    if (options_.sort_keys)
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return less_than(a->first, b->first); });
    const std::string separator = open(out, '{', level);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += separator;
      encode_string(out, key_text(items[i]->first), options_.ensure_ascii);
      out += options_.key_separator;
      encode(out, items[i]->second, level + 1);
      check_string_size(out.size());
    }
    close(out, '}', level);
  }

  const JsonDumpOptions& options_;
};

}  // namespace

std::string python_json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Encoder(options).encode(out, v, 0);
  return out;
}

}  // namespace trlhpc::chat_template
