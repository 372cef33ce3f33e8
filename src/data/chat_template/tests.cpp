// The tests of `x is name(args)` (jinja2.tests), with Python's type rules: bool counts as a number,
// Undefined is iterable and a sequence (it has __iter__, __len__ and __getitem__), dicts are sequences.
#include <map>

#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

namespace {

using TestFn = bool (*)(const Value&, CallArgs&);

Value argument(CallArgs& a, const char* name) {
  if (!a.has(0, name)) throw EvalError(std::string("the test needs an argument '") + name + "'");
  return a.get(0, name);
}

bool t_defined(const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, CallArgs&) { return v.is_none(); }
bool t_string(const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, CallArgs&) { return v.kind() == Kind::Dict; }
bool t_iterable(const Value& v, CallArgs&) {
  return v.is_string() || v.kind() == Kind::List || v.kind() == Kind::Dict || v.is_undefined();
}
bool t_sequence(const Value& v, CallArgs& a) { return t_iterable(v, a); }
bool t_number(const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(const Value& v, CallArgs&) { return v.kind() == Kind::Int; }
bool t_float(const Value& v, CallArgs&) { return v.kind() == Kind::Float; }
bool t_boolean(const Value& v, CallArgs&) { return v.kind() == Kind::Bool; }
bool t_true(const Value& v, CallArgs&) { return v.kind() == Kind::Bool && v.as_bool(); }
bool t_false(const Value& v, CallArgs&) { return v.kind() == Kind::Bool && !v.as_bool(); }
bool t_callable(const Value& v, CallArgs&) { return v.kind() == Kind::Callable; }

// jinja2: value % 2 == 1 / == 0, value % num == 0, with Python's % (floats allowed).
bool remainder_is(const Value& v, const Value& divisor, int64_t expected) {
  return binary_operator("%", v, divisor) == Value(expected);
}
bool t_odd(const Value& v, CallArgs&) { return remainder_is(v, Value(int64_t{2}), 1); }
bool t_even(const Value& v, CallArgs&) { return remainder_is(v, Value(int64_t{2}), 0); }
bool t_divisibleby(const Value& v, CallArgs& a) { return remainder_is(v, argument(a, "num"), 0); }

bool t_eq(const Value& v, CallArgs& a) { return v == argument(a, "other"); }
bool t_ne(const Value& v, CallArgs& a) { return v != argument(a, "other"); }
bool t_lt(const Value& v, CallArgs& a) { return less_than(v, argument(a, "other")); }
bool t_gt(const Value& v, CallArgs& a) { return less_than(argument(a, "other"), v); }
bool t_le(const Value& v, CallArgs& a) { return !less_than(argument(a, "other"), v); }
bool t_ge(const Value& v, CallArgs& a) { return !less_than(v, argument(a, "other")); }
bool t_in(const Value& v, CallArgs& a) { return contains(argument(a, "seq"), v); }

// Python `is`: identity. Scalars are compared by kind and value (None/True/False are singletons).
bool t_sameas(const Value& v, CallArgs& a) {
  const Value other = argument(a, "other");
  return v.kind() == other.kind() && v == other;
}

// str.islower() / str.isupper(): at least one cased character and none of the other case.
bool case_test(const Value& v, bool want_lower) {
  bool cased = false;
  for (char32_t cp : utf8_decode(v.str())) {
    if (!is_cased_letter(cp)) continue;
    const bool lower = to_upper(cp) != cp || cp == 0xDF;
    if (lower != want_lower) return false;
    cased = true;
  }
  return cased;
}
bool t_lower(const Value& v, CallArgs&) { return case_test(v, true); }
bool t_upper(const Value& v, CallArgs&) { return case_test(v, false); }

const std::map<std::string, TestFn>& test_table() {
  static const std::map<std::string, TestFn> table = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq},           {"equalto", t_eq},        {"even", t_even},       {"false", t_false},
      {"float", t_float},     {"ge", t_ge},             {"greaterthan", t_gt},  {"gt", t_gt},
      {"in", t_in},           {"integer", t_integer},   {"iterable", t_iterable}, {"le", t_le},
      {"lessthan", t_lt},     {"lower", t_lower},       {"lt", t_lt},           {"mapping", t_mapping},
      {"ne", t_ne},           {"none", t_none},         {"number", t_number},   {"odd", t_odd},
      {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},   {"true", t_true},
      {"undefined", t_undefined}, {"upper", t_upper}};
  return table;
}

}  // namespace

bool is_known_test(const std::string& name) { return test_table().count(name) != 0; }

std::string known_tests_list() {
  std::string out;
  for (const auto& [name, fn] : test_table()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

bool apply_test(Interpreter&, const std::string& name, const Value& subject, CallArgs& args) {
  const auto it = test_table().find(name);
  if (it == test_table().end()) throw EvalError("unknown test '" + name + "'");
  return it->second(subject, args);
}

}  // namespace trlhpc::chat_template
