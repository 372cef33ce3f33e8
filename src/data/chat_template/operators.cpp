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

// str * n, list * n: the size is checked before anything is built ("ab" * 10**11 must not try).
Value repeat(const Value& sequence, int64_t times) {
  const size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().items.size();
  if (times <= 0 || unit == 0) return sequence.is_string() ? Value("") : Value::list({}, sequence.as_list().is_tuple);
  const size_t limit = sequence.is_string() ? kMaxStringBytes : kMaxListItems;
  if (static_cast<uint64_t>(times) > limit / unit)
    throw EvalError("repeating a " + sequence.type_name() + " of " + std::to_string(unit) + (sequence.is_string() ? " bytes " : " items ") +
                    std::to_string(times) + " times exceeds trlhpc's limit of " + std::to_string(limit) +
                    (sequence.is_string() ? " bytes (kMaxStringBytes)" : " items (kMaxListItems)"));
  if (sequence.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(unit * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i)
    items.insert(items.end(), sequence.as_list().items.begin(), sequence.as_list().items.end());
  return Value::list(std::move(items), sequence.as_list().is_tuple);
}

// Python integers are unbounded; trlhpc's are 64-bit, so a result outside that range is an error
// rather than a silent wrap-around (signed overflow is undefined behaviour in C++).
[[noreturn]] void integer_overflow(const std::string& op, int64_t a, int64_t b) {
  throw EvalError("integer overflow: " + std::to_string(a) + " " + op + " " + std::to_string(b) +
                  " does not fit in 64 bits (trlhpc's chat-template integers are 64-bit)");
}

// a op b for + - *, or an EvalError when it overflows.
int64_t checked_integer_op(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflowed = op == "+" ? __builtin_add_overflow(a, b, &r)
                          : op == "-" ? __builtin_sub_overflow(a, b, &r)
                                      : __builtin_mul_overflow(a, b, &r);
  if (overflowed) integer_overflow(op, a, b);
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) integer_overflow("//", a, b);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Exponentiation by squaring, each product checked.
int64_t integer_power(int64_t base, int64_t exponent) {
  int64_t result = 1, factor = base;
  for (int64_t e = exponent; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(result, factor, &result)) integer_overflow("**", base, exponent);
    if (e > 1 && __builtin_mul_overflow(factor, factor, &factor)) integer_overflow("**", base, exponent);
  }
  return result;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool integral = a.is_integral() && b.is_integral();
  if (op == "+" || op == "-" || op == "*") {
    if (integral) return Value(checked_integer_op(op, a.integer(), b.integer()));
    return Value(op == "+" ? a.number() + b.number() : op == "-" ? a.number() - b.number() : a.number() * b.number());
  }
  if (op == "/") {
    if (b.number() == 0.0) throw EvalError("division by zero");
    return Value(a.number() / b.number());
  }
  if (op == "//" || op == "%") {
    if (b.number() == 0.0) throw EvalError(integral ? "integer division or modulo by zero" : "float modulo");
    if (integral) {
      if (op == "%" && b.integer() == -1) return Value(int64_t{0});  // INT64_MIN % -1 traps in C++
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
  if (integral && b.integer() >= 0) return Value(integer_power(a.integer(), b.integer()));
  return Value(std::pow(a.number(), b.number()));
}

// Width and precision of a printf-style conversion, each at most kMaxFormatWidth.
void check_format_spec(const std::string& spec) {
  int64_t number = 0;
  for (char c : spec) {
    if (c >= '0' && c <= '9') {
      number = number * 10 + (c - '0');
      if (number > kMaxFormatWidth)
        throw EvalError("format width or precision above trlhpc's limit of " + std::to_string(kMaxFormatWidth) +
                        " (kMaxFormatWidth) in '%" + spec + "'");
    } else {
      number = 0;
    }
  }
}

// snprintf into a string of the size it asks for.
template <class T>
std::string c_format(const std::string& format, T value) {
  const int n = std::snprintf(nullptr, 0, format.c_str(), value);
  if (n < 0) throw EvalError("invalid format '" + format + "'");
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format.c_str(), value);
  out.resize(static_cast<size_t>(n));
  return out;
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
    check_format_spec(spec);
    const char type = format[i];
    if (next >= values.size()) throw EvalError("not enough arguments for format string");
    const Value& v = values[next++];
    if (type == 's' || type == 'r') {
      const std::string text = type == 's' ? v.str() : v.repr();
      out += spec.empty() ? text : c_format("%" + spec + "s", text.c_str());
    } else if (type == 'd' || type == 'i' || type == 'f') {
      if (!v.is_number()) throw EvalError("%" + std::string(1, type) + " format: a real number is required, not " + v.type_name());
      if (type == 'f') out += c_format("%" + spec + "f", v.number());
      else out += c_format("%" + spec + "lld", static_cast<long long>(v.kind() == Kind::Float ? float_to_integer(v.as_float()) : v.integer()));
    } else {
      throw EvalError(std::string("unsupported format character '") + type + "'");
    }
    check_string_size(out.size());
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
      if (v.as_string().size() > kMaxListItems && utf8_length(v.as_string()) > kMaxListItems)
        throw EvalError("iterating a string of " + std::to_string(utf8_length(v.as_string())) +
                        " characters exceeds trlhpc's limit of " + std::to_string(kMaxListItems) + " items (kMaxListItems)");
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
