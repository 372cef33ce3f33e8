// Python operator semantics for chat-template values: arithmetic, concatenation, ordering, `in`,
// iteration and len() (error texts follow CPython's TypeError messages).
#include <cmath>
#include <cstdio>

#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

void throw_undefined(const Value& undefined) { throw EvalError(undefined.as_undefined().hint); }

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw EvalError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& sequence, int64_t times) {
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i)
    items.insert(items.end(), sequence.as_list().items.begin(), sequence.as_list().items.end());
  return Value::list(std::move(items), sequence.as_list().is_tuple);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool integral = a.is_integral() && b.is_integral();
  if (op == "+") return integral ? Value(a.integer() + b.integer()) : Value(a.number() + b.number());
  if (op == "-") return integral ? Value(a.integer() - b.integer()) : Value(a.number() - b.number());
  if (op == "*") return integral ? Value(a.integer() * b.integer()) : Value(a.number() * b.number());
  if (op == "/") {
    if (b.number() == 0.0) throw EvalError("division by zero");
    return Value(a.number() / b.number());
  }
  if (op == "//" || op == "%") {
    if (b.number() == 0.0) throw EvalError(integral ? "integer division or modulo by zero" : "float modulo");
    if (integral) {
      const int64_t q = floor_div(a.integer(), b.integer());
      return op == "//" ? Value(q) : Value(a.integer() - q * b.integer());
    }
    const double q = std::floor(a.number() / b.number());
    if (op == "//") return Value(q);
    double m = std::fmod(a.number(), b.number());  // CPython float_rem: the result takes the divisor's sign
    if (m != 0.0) {
      if ((m < 0) != (b.number() < 0)) m += b.number();
    } else {
      m = std::copysign(0.0, b.number());
    }
    return Value(m);
  }
  // "**"
  if (a.number() == 0.0 && b.number() < 0.0) throw EvalError("0.0 cannot be raised to a negative power");
  if (integral && b.integer() >= 0) {
    int64_t result = 1;
    for (int64_t i = 0; i < b.integer(); ++i) result *= a.integer();
    return Value(result);
  }
  return Value(std::pow(a.number(), b.number()));
}

// printf-style 'fmt' % args: %s %r %d %i %f %% with optional flags (-, 0), width and precision.
Value percent_format(const std::string& format, const Value& args) {
  // Python: a tuple supplies the arguments; anything else is one argument, and a non-tuple container
  // (dict, list: PyMapping_Check) also waives the "not all arguments converted" check.
  std::vector<Value> values;
  const bool is_tuple = args.kind() == Kind::List && args.as_list().is_tuple;
  const bool mapping = args.kind() == Kind::Dict || (args.kind() == Kind::List && !is_tuple) || args.is_undefined();
  if (is_tuple) values = args.as_list().items;
  else values.push_back(args);
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) throw EvalError("incomplete format");
    if (format[i] == '%') {
      out.push_back('%');
      continue;
    }
    const size_t spec_begin = i;
    while (i < format.size() && std::string("-+ #0123456789.").find(format[i]) != std::string::npos) ++i;
    if (i >= format.size()) throw EvalError("incomplete format");
    const std::string spec = format.substr(spec_begin, i - spec_begin);
    const char type = format[i];
    if (next >= values.size()) throw EvalError("not enough arguments for format string");
    const Value& v = values[next++];
    char buffer[512];
    if (type == 's' || type == 'r') {
      const std::string text = type == 's' ? v.str() : v.repr();
      std::snprintf(buffer, sizeof buffer, ("%" + spec + "s").c_str(), text.c_str());
    } else if (type == 'd' || type == 'i' || type == 'f') {
      if (!v.is_number()) throw EvalError("%" + std::string(1, type) + " format: a real number is required, not " + v.type_name());
      if (type == 'f') std::snprintf(buffer, sizeof buffer, ("%" + spec + "f").c_str(), v.number());
      else std::snprintf(buffer, sizeof buffer, ("%" + spec + "lld").c_str(),
                         static_cast<long long>(v.kind() == Kind::Float ? static_cast<int64_t>(v.as_float()) : v.integer()));
    } else {
      throw EvalError(std::string("unsupported format character '") + type + "'");
    }
    out += buffer;
  }
  if (!mapping && next < values.size()) throw EvalError("not all arguments converted during string formatting");
  return Value(std::move(out));
}

}  // namespace

Value binary_operator(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (op == "%" && a.is_string()) return percent_format(a.as_string(), b);
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.kind() == Kind::List && b.kind() == Kind::List && a.as_list().is_tuple == b.as_list().is_tuple) {
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::list(std::move(items), a.as_list().is_tuple);
    }
    if (a.is_string()) throw EvalError("can only concatenate str (not \"" + b.type_name() + "\") to str");
  }
  if (op == "*") {
    if ((a.is_string() || a.kind() == Kind::List) && b.is_integral()) return repeat(a, b.integer());
    if ((b.is_string() || b.kind() == Kind::List) && a.is_integral()) return repeat(b, a.integer());
  }
  unsupported(op, a, b);
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.integer() < b.integer();
    return a.number() < b.number();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.kind() == Kind::List && b.kind() == Kind::List && a.as_list().is_tuple == b.as_list().is_tuple) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (x[i] != y[i]) return less_than(x[i], y[i]);
    return x.size() < y.size();
  }
  throw EvalError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::String:
      if (!item.is_string())
        throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::List:
      for (const Value& v : container.as_list().items)
        if (v == item) return true;
      return false;
    case Kind::Dict:
      if ((item.kind() == Kind::List && !item.as_list().is_tuple) || item.kind() == Kind::Dict)
        throw EvalError("unhashable type: '" + item.type_name() + "'");
      return container.as_dict().find(item) != nullptr;
    case Kind::Undefined: return false;
    default: throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::List: return v.as_list().items;
    case Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, value] : v.as_dict().items) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      for (char32_t cp : utf8_decode(v.as_string())) chars.push_back(Value(utf8_encode(std::u32string(1, cp))));
      return chars;
    }
    case Kind::Undefined: return {};
    default: throw EvalError("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::String: return static_cast<int64_t>(utf8_length(v.as_string()));
    case Kind::List: return static_cast<int64_t>(v.as_list().items.size());
    case Kind::Dict: return static_cast<int64_t>(v.as_dict().items.size());
    case Kind::Undefined: return 0;
    default: throw EvalError("object of type '" + v.type_name() + "' has no len()");
  }
}

}  // namespace trlhpc::chat_template
