// Methods on strings and dicts (what the sandbox lets templates call) and the globals transformers
// installs: range, dict, namespace, raise_exception, strftime_now.
#include <ctime>
#include <set>

#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

namespace {

std::optional<std::string> optional_string(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string()) throw EvalError("expected a string argument, got '" + v.type_name() + "'");
  return v.as_string();
}

std::string string_argument(const CallArgs& a, size_t index, const char* name) {
  const Value v = a.get(index, name, Value::undefined(""));
  if (!v.is_string()) throw EvalError(std::string("argument '") + name + "' must be a string, got '" + v.type_name() + "'");
  return v.as_string();
}

// str.startswith / endswith: a prefix or a tuple of prefixes.
bool affix_match(const std::string& s, const Value& affix, bool at_start) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) throw EvalError("startswith/endswith take a string or a tuple of strings");
    const std::string& p = v.as_string();
    if (p.size() > s.size()) return false;
    return at_start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (affix.kind() == Kind::List) {
    for (const Value& v : affix.as_list().items)
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

Value string_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value(python_strip(s, optional_string(a.get(0, "chars")), name != "rstrip", name != "lstrip"));
  if (name == "upper") return Value(python_upper(s));
  if (name == "lower") return Value(python_lower(s));
  if (name == "title") return Value(python_title(s));
  if (name == "capitalize") return Value(python_capitalize(s));
  if (name == "startswith" || name == "endswith") return Value(affix_match(s, a.get(0, "prefix"), name == "startswith"));
  if (name == "split") {
    std::vector<Value> parts;
    const std::optional<std::string> sep = optional_string(a.get(0, "sep"));
    if (sep && sep->empty()) throw EvalError("empty separator");
    for (auto& p : python_split(s, sep, a.get(1, "maxsplit", Value(int64_t{-1})).integer())) parts.push_back(Value(p));
    return Value::list(std::move(parts));
  }
  if (name == "replace")
    return Value(python_replace(s, string_argument(a, 0, "old"), string_argument(a, 1, "new"),
                                a.get(2, "count", Value(int64_t{-1})).integer()));
  if (name == "find" || name == "count") {
    const std::string needle = string_argument(a, 0, "sub");
    if (name == "find") {
      const size_t hit = s.find(needle);
      return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, hit))));
    }
    if (needle.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : iterate(a.get(0, "iterable"))) {
      if (!item.is_string()) throw EvalError("sequence item: expected str instance, " + item.type_name() + " found");
      out += (first ? "" : s) + item.as_string();
      first = false;
      check_string_size(out.size());
    }
    return Value(std::move(out));
  }
  const std::u32string text = utf8_decode(s);
  auto all_of = [&](bool (*pred)(char32_t)) {
    if (text.empty()) return false;
    for (char32_t cp : text)
      if (!pred(cp)) return false;
    return true;
  };
  if (name == "isspace") return Value(all_of(python_isspace));
  if (name == "isdigit") return Value(all_of([](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value(all_of(is_cased_letter));
  if (name == "isalnum") return Value(all_of([](char32_t c) { return is_cased_letter(c) || (c >= '0' && c <= '9'); }));
  throw EvalError("str has no supported method '" + name + "'");
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> names = {"strip", "lstrip", "rstrip", "upper", "lower", "title", "capitalize",
                                              "startswith", "endswith", "split", "replace", "find", "count",
                                              "join", "isspace", "isdigit", "isalpha", "isalnum"};
  return names;
}

Value dict_method(const Dict& d, const std::string& name, CallArgs& a) {
  if (name == "get") {
    const Value* v = d.find(a.get(0, "key"));
    return v ? *v : a.get(1, "default");
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (name == "items") out.push_back(Value::list({k, v}, true));
    else out.push_back(name == "keys" ? k : v);
  }
  return Value::list(std::move(out));
}

// ImmutableSandboxedEnvironment refuses these (jinja2.sandbox.modifies_known_mutable).
const std::set<std::string>& mutating_methods() {
  static const std::set<std::string> names = {"append", "extend", "insert", "pop",   "remove",     "clear",
                                              "sort",   "reverse", "update", "popitem", "setdefault"};
  return names;
}

}  // namespace

Value bound_method(const Value& object, const std::string& name) {
  const std::string qualified = object.type_name() + "." + name;
  if (object.is_string() && string_methods().count(name)) {
    const std::string s = object.as_string();
    return Value::function(qualified, [s, name](CallArgs& a, Interpreter&) { return string_method(s, name, a); });
  }
  if (object.kind() == Kind::Dict && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    const Value self = object;
    return Value::function(qualified, [self, name](CallArgs& a, Interpreter&) { return dict_method(self.as_dict(), name, a); },
                           self);
  }
  if (object.kind() == Kind::List && (name == "count" || name == "index")) {
    const Value self = object;
    return Value::function(qualified, [self, name](CallArgs& a, Interpreter&) -> Value {
      const Value needle = a.get(0, "value");
      int64_t count = 0, position = 0;
      for (const Value& item : self.as_list().items) {
        if (item == needle) {
          if (name == "index") return Value(position);
          ++count;
        }
        ++position;
      }
      if (name == "index") throw EvalError(needle.repr() + " is not in list");
      return Value(count);
    }, self);
  }
  if ((object.kind() == Kind::List || object.kind() == Kind::Dict) && mutating_methods().count(name)) {
    return Value::function(qualified, [qualified](CallArgs&, Interpreter&) -> Value {
      throw EvalError("access to attribute '" + qualified + "' is unsafe: the sandbox forbids modifying lists and "
                      "dicts (use namespace() and {% set ns.attr = ... %})");
    });
  }
  return Value::undefined("");
}

namespace {

Value make_namespace(CallArgs& a, Interpreter&) {
  auto ns = std::make_shared<Dict>();
  if (!a.positional.empty()) {
    if (a.positional[0].kind() != Kind::Dict) throw EvalError("namespace() takes a dict or keyword arguments");
    for (const auto& [k, v] : a.positional[0].as_dict().items) ns->set(k, v);
  }
  for (const auto& [k, v] : a.keyword) ns->set(Value(k), v);
  for (const auto& [k, v] : ns->items) check_namespace_item(v);
  for (const auto& [k, v] : ns->items)
    if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_')
      throw EvalError("Chat templates cannot store underscore-prefixed attributes on a namespace, but got " + k.repr());
  return Value(NamespacePtr(std::move(ns)));
}

Value make_range(CallArgs& a, Interpreter&) {
  int64_t start = 0, stop = 0, step = 1;
  for (const Value& v : a.positional)
    if (!v.is_integral()) throw EvalError("range() takes integers, got '" + v.type_name() + "'");
  if (a.positional.size() == 1) stop = a.positional[0].integer();
  else if (a.positional.size() >= 2) {
    start = a.positional[0].integer();
    stop = a.positional[1].integer();
    if (a.positional.size() >= 3) step = a.positional[2].integer();
  } else {
    throw EvalError("range expected at least 1 argument");
  }
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(items.size()) >= kMaxRangeItems)
      throw EvalError("range too big (the sandbox allows " + std::to_string(kMaxRangeItems) + " items)");
    items.push_back(Value(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // the next value is past int64, so past stop too
  }
  return Value::list(std::move(items));
}

}  // namespace

void install_globals(Scope& scope) {
  scope.set("namespace", Value::function("namespace", make_namespace));
  scope.set("range", Value::function("range", make_range));
  scope.set("dict", Value::function("dict", [](CallArgs& a, Interpreter&) {
              std::vector<std::pair<Value, Value>> items;
              if (!a.positional.empty() && a.positional[0].kind() == Kind::Dict) items = a.positional[0].as_dict().items;
              for (const auto& [k, v] : a.keyword) items.emplace_back(Value(k), v);
              return Value::dict(std::move(items));
            }));
  scope.set("raise_exception", Value::function("raise_exception", [](CallArgs& a, Interpreter&) -> Value {
              throw RaisedException(a.get(0, "message", Value("")).str());
            }));
  scope.set("strftime_now", Value::function("strftime_now", [](CallArgs& a, Interpreter&) {
              const std::string format = a.get(0, "format", Value("")).str();
              const std::time_t now = std::time(nullptr);
              std::tm local{};
              localtime_r(&now, &local);
              char buffer[512];
              const size_t n = std::strftime(buffer, sizeof buffer, format.c_str(), &local);
              return Value(std::string(buffer, n));
            }));
}

}  // namespace trlhpc::chat_template
