#pragma once
// The values a chat template computes with: the Python objects Jinja2 sees when transformers renders
// `apply_chat_template` (None, bool, int, float, str, list/tuple, dict, jinja2's Undefined, namespace(),
// callables), with Python's semantics for truthiness, equality, ordering, str() and repr().
//
// Strings are UTF-8; everything Python counts in characters (len, indexing, slicing) counts Unicode code
// points here (see text.hpp). Lists and dicts are shared, immutable after construction
// (transformers renders in jinja2's ImmutableSandboxedEnvironment, which forbids mutating them); only a
// namespace() object is mutable, through `{% set ns.attr = ... %}`.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/data/chat_template/limits.hpp"

namespace trlhpc::chat_template {

class Value;
struct CallArgs;
class Interpreter;

// A failure during evaluation, without a template position yet: the interpreter turns it into a
// UserError naming the innermost expression's line and column (interpreter.hpp).
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// jinja2.Undefined: a missing variable, key or attribute. `hint` names it for error messages
// ("'tools' is undefined").
struct Undefined {
  std::string hint;
};

// Lists, dicts and callables record how deeply they nest (1 + their deepest element) and whether a
// namespace() is inside, when they are built: the limits of limits.hpp are checked there, and a
// namespace can then never come to hold itself (a reference cycle).
struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // repr "(a, b)" instead of "[a, b]"
  int depth = 1;
  bool holds_namespace = false;
  uint64_t weight = 1;  // Value::weight
};

// A Python dict (insertion-ordered). Keys are Values compared with Python ==; dicts in chat templates
// are small, so lookup is a linear scan.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;  // as List; not maintained for a namespace (Value::depth computes it)
  bool holds_namespace = false;
  uint64_t weight = 1;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);  // replaces an equal key in place, else appends
};

// Anything a template can call: globals (range, namespace, raise_exception, ...), bound methods
// ('abc'.upper) and macros.
struct Callable {
  std::string name;
  std::function<Value(CallArgs&, Interpreter&)> call;
  int depth = 0;                 // a bound method holds its object: the object's depth + 1
  bool holds_namespace = false;  // ... and whatever namespace that object holds
  uint64_t weight = 1;
};

using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using NamespacePtr = std::shared_ptr<Dict>;  // namespace(): the one mutable object
using CallablePtr = std::shared_ptr<const Callable>;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

class Value {
 public:
  Value() : data_(nullptr) {}  // None
  Value(std::nullptr_t) : data_(nullptr) {}
  Value(bool b) : data_(b) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : data_(i) {}
  Value(double d) : data_(d) {}
  // EvalError when `s` is longer than kMaxStringBytes (limits.hpp).
  Value(std::string s);
  Value(const char* s) : data_(std::string(s)) {}
  Value(Undefined u) : data_(std::move(u)) {}
  Value(ListPtr l) : data_(std::move(l)) {}
  Value(DictPtr d) : data_(std::move(d)) {}
  Value(NamespacePtr n) : data_(std::move(n)) {}
  Value(CallablePtr c) : data_(std::move(c)) {}

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  // EvalError when the result would exceed kMaxListItems or kMaxValueDepth (limits.hpp).
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(std::vector<std::pair<Value, Value>> items);
  // `bound` is the object a bound method holds (None for a free function).
  static Value function(std::string name, std::function<Value(CallArgs&, Interpreter&)> fn,
                        const Value& bound = Value());
  // EvalError for JSON nested deeper than kMaxValueDepth or holding an over-long string.
  template <class BasicJson>
  static Value from_json(const BasicJson& j, int depth = 1);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_number() const { return kind() == Kind::Int || kind() == Kind::Float || kind() == Kind::Bool; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const Undefined& as_undefined() const { return std::get<Undefined>(data_); }
  const List& as_list() const { return *std::get<ListPtr>(data_); }
  const Dict& as_dict() const { return *std::get<DictPtr>(data_); }
  Dict& as_namespace() const { return *std::get<NamespacePtr>(data_); }
  const Callable& as_callable() const { return *std::get<CallablePtr>(data_); }
  // Int, Bool or Float as a double (Python's numeric tower: bool is an int).
  double number() const;
  // Int or Bool as an integer; EvalError for anything else (Python's "'str' object cannot be
  // interpreted as an integer").
  int64_t integer() const;
  bool is_integral() const { return kind() == Kind::Int || kind() == Kind::Bool; }
  // Nesting depth (0 for scalars, 1 for a flat list) and whether a namespace() is inside.
  int depth() const;
  bool holds_namespace() const;
  // Roughly the work of walking the value once: 1 per scalar, 1 per 64 bytes of string, lists and
  // dicts the sum over their (nested) items, saturating. The interpreter charges it to the render's
  // step budget whenever an expression yields the value, so loops over big values end in time too.
  uint64_t weight() const;

  // Python bool(x); Undefined is false.
  bool truthy() const;
  // Python str(x); Undefined renders as "". repr(x) for elements of containers.
  std::string str() const;
  std::string repr() const;
  // Python type name for error messages: 'str', 'int', 'NoneType', 'Undefined', ...
  std::string type_name() const;

  // Python ==: 1 == 1.0 == True; containers compare element-wise; Undefined equals only Undefined.
  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, ListPtr, DictPtr, NamespacePtr,
               CallablePtr>
      data_;
};

// Positional and keyword arguments of a call, filter or test (after the filtered value / test subject).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Argument `name` at position `index` (Python's binding rule), else `fallback`.
  Value get(size_t index, const std::string& name, Value fallback = Value()) const;
  bool has(size_t index, const std::string& name) const;
};

// Python's repr() of a float ("1.0", "0.1", "1e-05", "1e+16", "inf").
std::string python_float_repr(double d);
// Python's repr() of a str: single quotes unless the text holds ' and no ", escapes as CPython does
// (non-printable characters as \xNN / \uNNNN; see text.cpp for the printable rule).
std::string python_string_repr(const std::string& s);

// EvalError naming kMaxValueDepth (limits.hpp).
[[noreturn]] void throw_too_deep();
// Python int(float): truncation toward zero; EvalError for nan, inf and values beyond 64 bits.
int64_t float_to_integer(double d);
// EvalError naming kMaxStringBytes when a string being built has grown past it.
void check_string_size(size_t bytes);

template <class BasicJson>
Value Value::from_json(const BasicJson& j, int depth) {
  if ((j.is_array() || j.is_object()) && depth > kMaxValueDepth) throw_too_deep();
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item, depth + 1));
      return list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(Value(it.key()), from_json(it.value(), depth + 1));
      return dict(std::move(items));
    }
    default: return Value::undefined("binary JSON value");
  }
}

}  // namespace trlhpc::chat_template
