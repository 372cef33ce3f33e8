// The filters chat templates use, with jinja2.filters' behaviour (and transformers' own tojson:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

std::optional<std::string> optional_string(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  return v.str();
}

// Python int(str) for base 10 (whitespace, sign and single underscores between digits allowed).
std::optional<int64_t> parse_python_int(const std::string& text, int base) {
  std::string s = python_strip(text, std::nullopt, true, true), digits;
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits.push_back(s[i]);
  }
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  const long long value = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0') return std::nullopt;
  return negative ? -value : value;
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string s = python_strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return value;
}

// An indent of `width` spaces (or a string of that length): at most kMaxIndentWidth.
int64_t indent_width(int64_t width, const char* filter) {
  if (width > kMaxIndentWidth)
    throw EvalError(std::string(filter) + ": an indent of " + std::to_string(width) + " exceeds trlhpc's limit of " +
                    std::to_string(kMaxIndentWidth) + " (kMaxIndentWidth)");
  return std::max<int64_t>(0, width);
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  return Value(python_strip(v.str(), optional_string(a.get(0, "chars")), true, true));
}
Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value(length_of(v)); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(python_upper(v.str())); }
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(python_lower(v.str())); }
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(python_capitalize(v.str())); }
Value f_title(Interpreter&, const Value& v, CallArgs&) { return Value(jinja_title(v.str())); }
Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(v.str()); }
// Markup(str(value)). (Markup's escaping of the other operand of `+` is not modelled: no autoescape.)
Value f_safe(Interpreter&, const Value& v, CallArgs&) { return Value(v.str()); }
Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::list(iterate(v)); }

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const bool boolean = a.get(1, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
  return v;
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonDumpOptions options;
  options.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
  const Value indent = a.get(1, "indent");
  if (!indent.is_none()) {
    options.has_indent = true;
    if (indent.is_string()) options.indent = indent.as_string();
    else if (indent.is_integral()) options.indent = std::string(static_cast<size_t>(indent_width(indent.integer(), "tojson")), ' ');
    else throw EvalError("tojson: indent must be an int or a string");
    indent_width(static_cast<int64_t>(options.indent.size()), "tojson");
    options.item_separator = ",";
  }
  const Value separators = a.get(2, "separators");
  if (!separators.is_none()) {
    if (separators.kind() != Kind::List || separators.as_list().items.size() != 2)
      throw EvalError("tojson: separators must be an (item_separator, key_separator) pair");
    options.item_separator = separators.as_list().items[0].str();
    options.key_separator = separators.as_list().items[1].str();
  }
  options.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
  return Value(python_json_dumps(v, options));
}

Value f_join(Interpreter& interp, const Value& v, CallArgs& a) {
  const std::string separator = a.get(0, "d", Value("")).str();
  const Value attribute = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    out += first ? "" : separator;
    first = false;
    out += (attribute.is_none() ? item : interp.get_item(item, attribute)).str();
    check_string_size(out.size());
  }
  return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string text = utf8_decode(v.as_string());
    std::reverse(text.begin(), text.end());
    return Value(utf8_encode(text));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  const Value count = a.get(2, "count");
  return Value(python_replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                              count.is_none() ? -1 : count.integer()));
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value fallback = a.get(0, "default", Value(int64_t{0}));
  const int base = static_cast<int>(a.get(1, "base", Value(int64_t{10})).integer());
  if (v.is_undefined()) throw_undefined(v);
  if (v.is_integral()) return Value(v.integer());
  if (v.kind() == Kind::Float) return std::isfinite(v.as_float()) ? Value(float_to_integer(v.as_float())) : fallback;
  if (v.is_string()) {
    if (auto i = parse_python_int(v.as_string(), base)) return Value(*i);
    if (auto d = parse_python_float(v.as_string()); d && std::isfinite(*d)) return Value(float_to_integer(*d));
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value fallback = a.get(0, "default", Value(0.0));
  if (v.is_undefined()) throw_undefined(v);
  if (v.is_number()) return Value(v.number());
  if (v.is_string())
    if (auto d = parse_python_float(v.as_string())) return Value(*d);
  return fallback;
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_number()) throw EvalError("bad operand type for abs(): '" + v.type_name() + "'");
  if (v.kind() == Kind::Float) return Value(std::fabs(v.as_float()));
  if (v.integer() == INT64_MIN) throw EvalError("integer overflow: abs(" + std::to_string(v.integer()) + ") does not fit in 64 bits");
  return Value(static_cast<int64_t>(std::llabs(v.integer())));
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = a.get(0, "precision", Value(int64_t{0})).integer();
  const std::string method = a.get(1, "method", Value("common")).str();
  if (!v.is_number()) throw EvalError("round: expected a number, got '" + v.type_name() + "'");
  if (method == "common" && v.is_integral()) return Value(v.integer());
  const double scale = std::pow(10.0, static_cast<double>(precision)), x = v.number() * scale;
  const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (v.kind() != Kind::Dict) throw EvalError("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, value] : v.as_dict().items) pairs.push_back(Value::list({k, value}, true));
  return Value::list(std::move(pairs));
}

Value f_map(Interpreter& interp, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value attribute = a.get(99, "attribute");
  if (a.positional.empty() && !attribute.is_none()) {
    const Value fallback = a.get(99, "default", Value::undefined(""));
    for (const Value& item : iterate(v)) {
      Value got = interp.get_item(item, attribute);
      out.push_back(got.is_undefined() && !fallback.is_undefined() ? fallback : got);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw EvalError("map: expected a filter name or attribute=");
  const std::string filter = a.positional[0].str();
  if (!is_known_filter(filter)) throw EvalError("map: unknown filter '" + filter + "'");
  CallArgs rest{std::vector<Value>(a.positional.begin() + 1, a.positional.end()), a.keyword};
  for (const Value& item : iterate(v)) out.push_back(apply_filter(interp, filter, item, rest));
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr share one implementation.
Value select_items(Interpreter& interp, const Value& v, CallArgs& a, bool by_attribute, bool keep_when) {
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (a.positional.empty()) throw EvalError("selectattr/rejectattr: missing the attribute name");
    attribute = a.positional[next++];
  }
  std::string test;
  if (next < a.positional.size()) test = a.positional[next++].str();
  if (!test.empty() && !is_known_test(test)) throw EvalError("unknown test '" + test + "'");
  CallArgs test_args{std::vector<Value>(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end()), {}};
  std::vector<Value> out;
  if (!v.truthy()) return Value::list({});  // jinja2's select_or_reject starts with `if value:`
  for (const Value& item : iterate(v)) {
    const Value subject = by_attribute ? interp.get_item(item, attribute) : item;
    const bool passed = test.empty() ? subject.truthy() : apply_test(interp, test, subject, test_args);
    if (passed == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(Interpreter& i, const Value& v, CallArgs& a) { return select_items(i, v, a, false, true); }
Value f_reject(Interpreter& i, const Value& v, CallArgs& a) { return select_items(i, v, a, false, false); }
Value f_selectattr(Interpreter& i, const Value& v, CallArgs& a) { return select_items(i, v, a, true, true); }
Value f_rejectattr(Interpreter& i, const Value& v, CallArgs& a) { return select_items(i, v, a, true, false); }

// jinja2's do_indent, including its habit of treating the text as ending with a newline.
Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  const Value width = a.get(0, "width", Value(int64_t{4}));
  const std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(indent_width(width.integer(), "indent")), ' ');
  indent_width(static_cast<int64_t>(pad.size()), "indent");
  const bool first = a.get(1, "first", Value(false)).truthy(), blank = a.get(2, "blank", Value(false)).truthy();
  std::vector<std::string> lines;
  const std::u32string text = utf8_decode(v.str() + "\n");
  std::u32string line;
  for (size_t i = 0; i < text.size(); ++i) {  // str.splitlines()
    const char32_t c = text[i];
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
        c == 0x2029) {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lines.push_back(utf8_encode(line));
      line.clear();
    } else {
      line.push_back(c);
    }
  }
  if (!line.empty()) lines.push_back(utf8_encode(line));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n" + ((blank || !lines[i].empty()) ? pad : std::string());
    out += lines[i];
    check_string_size(out.size());
  }
  return Value(first ? pad + out : out);
}

const std::map<std::string, FilterFn>& filter_table() {
  static const std::map<std::string, FilterFn> table = {
      {"abs", f_abs},         {"capitalize", f_capitalize}, {"count", f_length},   {"d", f_default},
      {"default", f_default}, {"first", f_first},           {"float", f_float},    {"indent", f_indent},
      {"int", f_int},         {"items", f_items},           {"join", f_join},      {"last", f_last},
      {"length", f_length},   {"list", f_list},             {"lower", f_lower},    {"map", f_map},
      {"reject", f_reject},   {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round},     {"safe", f_safe},             {"select", f_select},  {"selectattr", f_selectattr},
      {"string", f_string},   {"title", f_title},           {"tojson", f_tojson},  {"trim", f_trim},
      {"upper", f_upper}};
  return table;
}

}  // namespace

bool is_known_filter(const std::string& name) { return filter_table().count(name) != 0; }

std::string known_filters_list() {
  std::string out;
  for (const auto& [name, fn] : filter_table()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

Value apply_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
  const auto it = filter_table().find(name);
  if (it == filter_table().end()) throw EvalError("unknown filter '" + name + "'");
  return it->second(interp, input, args);
}

}  // namespace trlhpc::chat_template
