// Expression evaluation: names, literals, attribute/item access, slicing, calls, filters, tests and
// operators (semantics in interpreter.hpp; attribute/item rules from jinja2's
// Environment.getattr / getitem).
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    const Level level(*this);
    Value result = eval_inner(e, scope);
    charge(result.weight() - 1);
    return result;
  } catch (const EvalError& error) {
    throw_template_error(e.line, e.column, error.what());
  } catch (const RaisedException& raised) {
    throw UserError(template_location(e.line, e.column) + ": the chat template raised an exception: " + raised.what());
  }
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope, size_t first_positional) {
  CallArgs args;
  for (size_t i = first_positional; i < e.operands.size(); ++i) args.positional.push_back(eval(*e.operands[i], scope));
  for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value, scope));
  return args;
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      const Value* v = scope->lookup(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::ListLit: case Expr::Kind::TupleLit: {
      std::vector<Value> items;
      for (const auto& item : e.operands) items.push_back(eval(*item, scope));
      return Value::list(std::move(items), e.kind == Expr::Kind::TupleLit);
    }
    case Expr::Kind::DictLit: {
      std::vector<std::pair<Value, Value>> items;
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2)
        items.emplace_back(eval(*e.operands[i], scope), eval(*e.operands[i + 1], scope));
      return Value::dict(std::move(items));
    }
    case Expr::Kind::Attribute: return get_attribute(eval(*e.operands[0], scope), e.name);
    case Expr::Kind::Subscript: return get_item(eval(*e.operands[0], scope), eval(*e.operands[1], scope));
    case Expr::Kind::Slice: return eval_slice(e, scope);
    case Expr::Kind::Call: {
      const Value callee = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      return call(callee, args);
    }
    case Expr::Kind::Filter: {
      const Value input = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      return apply_filter(*this, e.name, input, args);
    }
    case Expr::Kind::Test: {
      const Value subject = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      return Value(apply_test(*this, e.name, subject, args) != e.negated);
    }
    case Expr::Kind::Unary: {
      const Value x = eval(*e.operands[0], scope);
      if (e.name == "not") return Value(!x.truthy());
      if (x.is_undefined()) throw_undefined(x);
      if (!x.is_number()) throw EvalError("bad operand type for unary " + e.name + ": '" + x.type_name() + "'");
      if (e.name == "+") return x.kind() == Kind::Float ? x : Value(x.integer());
      if (x.kind() == Kind::Float) return Value(-x.as_float());
      if (x.integer() == INT64_MIN) throw EvalError("integer overflow: -(" + std::to_string(x.integer()) + ") does not fit in 64 bits");
      return Value(-x.integer());
    }
    case Expr::Kind::Binary: {
      const Value a = eval(*e.operands[0], scope);
      if (e.name == "and") return a.truthy() ? eval(*e.operands[1], scope) : a;
      if (e.name == "or") return a.truthy() ? a : eval(*e.operands[1], scope);
      return binary_operator(e.name, a, eval(*e.operands[1], scope));
    }
    case Expr::Kind::Compare: return eval_compare(e, scope);
    case Expr::Kind::Conditional:
      if (eval(*e.operands[1], scope).truthy()) return eval(*e.operands[0], scope);
      if (e.operands[2]) return eval(*e.operands[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and has no else section");
  }
  return Value();
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.operands[0], scope);
  for (size_t i = 0; i < e.comparisons.size(); ++i) {
    Value right = eval(*e.operands[i + 1], scope);
    const std::string& op = e.comparisons[i];
    bool result;
    if (op == "==") result = left == right;
    else if (op == "!=") result = left != right;
    else if (op == "<") result = less_than(left, right);
    else if (op == ">") result = less_than(right, left);
    else if (op == "<=") result = less_than(left, right) || left == right;
    else if (op == ">=") result = less_than(right, left) || left == right;
    else if (op == "in") result = contains(right, left);
    else result = !contains(right, left);
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_slice(const Expr& e, const ScopePtr& scope) {
  const Value object = eval(*e.operands[0], scope);
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!e.operands[k + 1]) continue;
    const Value b = eval(*e.operands[k + 1], scope);
    if (b.is_none()) continue;
    if (!b.is_integral()) throw EvalError("slice indices must be integers or None, not '" + b.type_name() + "'");
    bounds[k] = b.integer();
  }
  if (bounds[2] && *bounds[2] == 0) throw EvalError("slice step cannot be zero");
  if (object.is_undefined()) throw_undefined(object);
  if (object.kind() == Kind::List) {
    const List& list = object.as_list();
    std::vector<Value> items;
    for (int64_t i : python_slice_indices(static_cast<int64_t>(list.items.size()), bounds[0], bounds[1], bounds[2]))
      items.push_back(list.items[static_cast<size_t>(i)]);
    return Value::list(std::move(items), list.is_tuple);
  }
  if (object.is_string()) {
    const std::u32string text = utf8_decode(object.as_string());
    std::u32string picked;
    for (int64_t i : python_slice_indices(static_cast<int64_t>(text.size()), bounds[0], bounds[1], bounds[2]))
      picked.push_back(text[static_cast<size_t>(i)]);
    return Value(utf8_encode(picked));
  }
  // jinja2 compiles slices to a direct Python subscript (no getitem fallback), so these raise.
  if (object.kind() == Kind::Dict) throw EvalError("unhashable type: 'slice'");
  throw EvalError("'" + object.type_name() + "' object is not subscriptable");
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.kind() == Kind::Callable) return callee.as_callable().call(args, *this);
  if (callee.is_undefined()) throw_undefined(callee);
  throw EvalError("'" + callee.type_name() + "' object is not callable");
}

// Jinja's message for a missing member: "'<type> object' has no <kind> <detail>".
static std::string no_member(const Value& object, const char* kind, const std::string& detail) {
  std::string message = "'";
  message += object.type_name();
  message += " object' has no ";
  message += kind;
  message += ' ';
  message += detail;
  return message;
}

Value Interpreter::get_attribute(const Value& object, const std::string& name) {
  switch (object.kind()) {
    case Kind::Undefined: throw_undefined(object);
    case Kind::Dict: {
      const Value method = bound_method(object, name);
      if (!method.is_undefined()) return method;
      if (const Value* v = object.as_dict().find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Kind::Namespace:
      if (const Value* v = object.as_namespace().find(name)) return *v;
      return Value::undefined("'Namespace' object has no attribute '" + name + "'");
    default: {
      const Value method = bound_method(object, name);
      if (!method.is_undefined()) return method;
      return Value::undefined(no_member(object, "attribute", "'" + name + "'"));
    }
  }
}

Value Interpreter::get_item(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Kind::Undefined: throw_undefined(object);
    case Kind::Dict:
      if (const Value* v = object.as_dict().find(key)) return *v;
      break;
    case Kind::Namespace:
      if (key.is_string()) return get_attribute(object, key.as_string());
      break;
    case Kind::List:
      if (key.is_integral()) {
        const auto& items = object.as_list().items;
        int64_t i = key.integer();
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(i)];
        return Value::undefined(no_member(object, "element", std::to_string(key.integer())));
      }
      break;
    case Kind::String:
      if (key.is_integral()) {
        const std::u32string text = utf8_decode(object.as_string());
        int64_t i = key.integer();
        if (i < 0) i += static_cast<int64_t>(text.size());
        if (i >= 0 && i < static_cast<int64_t>(text.size())) return Value(utf8_encode(text.substr(static_cast<size_t>(i), 1)));
        return Value::undefined("'str object' has no element " + std::to_string(key.integer()));
      }
      break;
    default: break;
  }
  if (key.is_string()) {  // jinja2 falls back to getattr for string keys: x['items'] is the method
    const Value method = bound_method(object, key.as_string());
    if (!method.is_undefined()) return method;
  }
  return Value::undefined(no_member(object, "attribute", key.repr()));
}

}  // namespace trlhpc::chat_template
