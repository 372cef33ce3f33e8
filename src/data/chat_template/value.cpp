// Value: Python semantics for the objects a chat template sees (see value.hpp).
#include "trlhpc/data/chat_template/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

[[noreturn]] void throw_too_many_items(size_t n) {
  throw EvalError("a list or dict of " + std::to_string(n) + " items exceeds trlhpc's limit of " +
                  std::to_string(kMaxListItems) + " (kMaxListItems)");
}

}  // namespace

void throw_too_deep() {
  throw EvalError("a value nested more than " + std::to_string(kMaxValueDepth) +
                  " levels deep (lists and dicts inside each other) exceeds trlhpc's limit (kMaxValueDepth)");
}

void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes)
    throw EvalError("a string of " + std::to_string(bytes) + " bytes exceeds trlhpc's limit of " +
                    std::to_string(kMaxStringBytes) + " bytes (kMaxStringBytes)");
}

int64_t float_to_integer(double d) {
  if (std::isnan(d)) throw EvalError("cannot convert float NaN to integer");
  if (!(d >= -0x1p63 && d < 0x1p63))
    throw EvalError("cannot convert float " + python_float_repr(d) + " to integer: it does not fit in 64 bits");
  return static_cast<int64_t>(d);
}

Value::Value(std::string s) {
  check_string_size(s.size());
  data_ = std::move(s);
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  if (items.size() > kMaxListItems) throw_too_many_items(items.size());
  auto l = std::make_shared<List>();
  for (const Value& item : items) {
    l->depth = std::max(l->depth, item.depth() + 1);
    l->holds_namespace = l->holds_namespace || item.holds_namespace();
    l->weight = saturating_add(l->weight, item.weight());
  }
  if (l->depth > kMaxValueDepth) throw_too_deep();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(ListPtr(std::move(l)));
}

Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  if (items.size() > kMaxListItems) throw_too_many_items(items.size());
  auto d = std::make_shared<Dict>();
  for (auto& [k, v] : items) {
    d->depth = std::max({d->depth, k.depth() + 1, v.depth() + 1});
    d->holds_namespace = d->holds_namespace || k.holds_namespace() || v.holds_namespace();
    d->weight = saturating_add(d->weight, saturating_add(k.weight(), v.weight()));
  }
  if (d->depth > kMaxValueDepth) throw_too_deep();
  for (auto& [k, v] : items) d->set(std::move(k), std::move(v));
  return Value(DictPtr(std::move(d)));
}

Value Value::function(std::string name, std::function<Value(CallArgs&, Interpreter&)> fn, const Value& bound) {
  auto c = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  c->depth = bound.kind() == Kind::None ? 0 : bound.depth() + 1;
  if (c->depth > kMaxValueDepth) throw_too_deep();
  c->holds_namespace = bound.holds_namespace();
  c->weight = saturating_add(1, bound.kind() == Kind::None ? 0 : bound.weight());
  return Value(CallablePtr(std::move(c)));
}

int Value::depth() const {
  switch (kind()) {
    case Kind::List: return as_list().depth;
    case Kind::Dict: return as_dict().depth;
    case Kind::Callable: return as_callable().depth;
    case Kind::Namespace: {  // mutable, so computed; its items hold no namespace (exec_set refuses one)
      int d = 1;
      for (const auto& [k, v] : as_namespace().items) d = std::max(d, v.depth() + 1);
      return d;
    }
    default: return 0;
  }
}

uint64_t Value::weight() const {
  switch (kind()) {
    case Kind::String: return 1 + as_string().size() / 64;
    case Kind::List: return as_list().weight;
    case Kind::Dict: return as_dict().weight;
    case Kind::Callable: return as_callable().weight;
    case Kind::Namespace: {
      uint64_t w = 1;
      for (const auto& [k, v] : as_namespace().items) w = saturating_add(w, v.weight());
      return w;
    }
    default: return 1;
  }
}

bool Value::holds_namespace() const {
  switch (kind()) {
    case Kind::Namespace: return true;
    case Kind::List: return as_list().holds_namespace;
    case Kind::Dict: return as_dict().holds_namespace;
    case Kind::Callable: return as_callable().holds_namespace;
    default: return false;
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

double Value::number() const {
  switch (kind()) {
    case Kind::Bool: return as_bool() ? 1.0 : 0.0;
    case Kind::Int: return static_cast<double>(as_int());
    case Kind::Float: return as_float();
    default: return 0.0;
  }
}

int64_t Value::integer() const {
  if (kind() == Kind::Bool) return as_bool() ? 1 : 0;
  if (kind() != Kind::Int) throw EvalError("'" + type_name() + "' object cannot be interpreted as an integer");
  return as_int();
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_float() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !as_list().items.empty();
    case Kind::Dict: return !as_dict().items.empty();
    case Kind::Namespace: case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return as_list().is_tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "?";
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then CPython's float_repr_style 'short' layout: positional notation when
  // the decimal exponent lies in [-4, 16), scientific ("1e-05", "1.5e+16") otherwise.
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string sci(buffer, end);  // "-1.2345e-05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    else if (decpt >= ndigits) out = digits + std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
    else out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  } else {
    out = digits.substr(0, 1);
    if (ndigits > 1) out.append(".").append(digits, 1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_text;
  }
  return sign + out;
}

std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : utf8_decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (python_isprintable(cp)) {
      utf8_append(out, cp);
    } else {
      char escape[16];
      if (cp < 0x100) std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(escape, sizeof escape, "\\U%08x", static_cast<unsigned>(cp));
      out += escape;
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float_repr(as_float());
    case Kind::String: return python_string_repr(as_string());
    case Kind::List: {
      const List& l = as_list();
      std::string out = l.is_tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + l.items[i].repr();
      if (l.is_tuple && l.items.size() == 1) out += ",";
      return out + (l.is_tuple ? ")" : "]");
    }
    case Kind::Dict: case Kind::Namespace: {
      const Dict& d = kind() == Kind::Dict ? as_dict() : as_namespace();
      std::string out = kind() == Kind::Dict ? "{" : "<Namespace {";
      for (size_t i = 0; i < d.items.size(); ++i)
        out += (i ? ", " : "") + d.items[i].first.repr() + ": " + d.items[i].second.repr();
      return out + (kind() == Kind::Dict ? "}" : "}>");
    }
    case Kind::Callable: return "<function " + as_callable().name + ">";
  }
  return "";
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.integer() == b.integer();
    return a.number() == b.number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: return a.as_string() == b.as_string();
    case Kind::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (x.items[i] != y.items[i]) return false;
      return true;
    }
    case Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || *other != v) return false;
      }
      return true;
    }
    case Kind::Namespace: return &a.as_namespace() == &b.as_namespace();
    case Kind::Callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

Value CallArgs::get(size_t index, const std::string& name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [key, value] : keyword)
    if (key == name) return value;
  return fallback;
}

bool CallArgs::has(size_t index, const std::string& name) const {
  if (index < positional.size()) return true;
  for (const auto& [key, value] : keyword)
    if (key == name) return true;
  return false;
}

}  // namespace trlhpc::chat_template
