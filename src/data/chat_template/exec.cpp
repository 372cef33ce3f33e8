// Statement execution: output, if, for (loop.*), set, macros and {% generation %} spans
// (semantics in interpreter.hpp).
#include <algorithm>
#include <optional>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/interpreter.hpp"

namespace trlhpc::chat_template {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    const auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

void check_namespace_item(const Value& value) {
  if (value.holds_namespace())
    throw EvalError("a namespace() attribute cannot hold a namespace (trlhpc refuses it: a namespace could then "
                    "hold itself)");
}

void Interpreter::charge(uint64_t steps) {
  steps_ += static_cast<int64_t>(std::min<uint64_t>(steps, static_cast<uint64_t>(kMaxRenderSteps)));
  if (steps_ > kMaxRenderSteps)
    throw EvalError("the template did more than " + std::to_string(kMaxRenderSteps) +
                    " steps of work in one render (expressions, statements, loop iterations, and the sizes of the "
                    "values they produce), trlhpc's limit (kMaxRenderSteps): a loop that would not end in reasonable "
                    "time");
}

Interpreter::Level::Level(Interpreter& interp) : interp_(interp) {
  interp_.charge(1);
  if (interp_.depth_ + 1 > kMaxEvaluationDepth)
    throw EvalError("evaluation nested more than " + std::to_string(kMaxEvaluationDepth) +
                    " levels deep, trlhpc's limit (kMaxEvaluationDepth)");
  ++interp_.depth_;
}

void Interpreter::append_output(const std::string& text) {
  check_string_size(out().size() + text.size());
  out() += text;
}

RenderOutput Interpreter::run(ScopePtr globals) {
  buffers_.assign(1, std::string());
  spans_.clear();
  macro_scopes_.clear();
  depth_ = 0;
  macro_calls_ = 0;
  steps_ = 0;
  auto root = std::make_shared<Scope>(std::move(globals));
  exec_body(program_.body, root);
  return RenderOutput{std::move(buffers_[0]), std::move(spans_)};
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope) {
  for (const auto& node : body) {
    const Flow flow = exec(*node, scope);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Node& node, const ScopePtr& scope) {
  std::optional<Level> level;
  try {
    level.emplace(*this);
    if (node.kind == Node::Kind::Text) append_output(node.text);
  } catch (const EvalError& e) {
    throw_template_error(node.line, node.column, e.what());
  }
  switch (node.kind) {
    case Node::Kind::Text: return Flow::Normal;
    case Node::Kind::Output: {
      const std::string text = eval(*node.expr, scope).str();
      try {
        append_output(text);
      } catch (const EvalError& e) {
        throw_template_error(node.line, node.column, e.what());
      }
      return Flow::Normal;
    }
    case Node::Kind::If:
      for (const auto& [condition, body] : node.branches)
        if (!condition || eval(*condition, scope).truthy()) return exec_body(body, scope);
      return Flow::Normal;
    case Node::Kind::For: return exec_for(node, scope);
    case Node::Kind::Set: case Node::Kind::SetBlock: exec_set(node, scope); return Flow::Normal;
    case Node::Kind::Macro: scope->set(node.name, make_macro(node, scope)); return Flow::Normal;
    case Node::Kind::Generation: exec_generation(node, scope); return Flow::Normal;
    case Node::Kind::Break: return Flow::Break;
    case Node::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

namespace {
void assign_targets(Scope& scope, const std::vector<std::string>& targets, const Value& value, const Node& at) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  std::vector<Value> items;
  try {
    items = iterate(value);
  } catch (const EvalError& e) {
    throw_template_error(at.line, at.column, std::string("cannot unpack: ") + e.what());
  }
  if (items.size() != targets.size())
    throw_template_error(at.line, at.column, "cannot unpack " + std::to_string(items.size()) + " values into " +
                                                 std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}
}  // namespace

Interpreter::Flow Interpreter::exec_for(const Node& node, const ScopePtr& scope) {
  const Value iterable = eval(*node.expr, scope);
  std::vector<Value> items;
  try {
    items = iterate(iterable);
  } catch (const EvalError& e) {
    throw_template_error(node.line, node.column, e.what());
  }
  if (node.condition) {  // `for x in xs if cond`: filtered before loop.* is computed, as in jinja2
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign_targets(*probe, node.targets, item, node);
      if (eval(*node.condition, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(node.else_body, scope);  // `else` belongs to the enclosing loop level
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    try {
      charge(kLoopIterationSteps);
    } catch (const EvalError& e) {
      throw_template_error(node.line, node.column, e.what());
    }
    auto iteration = std::make_shared<Scope>(scope);
    assign_targets(*iteration, node.targets, items[static_cast<size_t>(i)], node);
    if (!node.uses_loop) {
      if (exec_body(node.body, iteration) == Flow::Break) break;
      continue;
    }
    std::vector<std::pair<Value, Value>> loop = {
        {Value("index"), Value(i + 1)},        {Value("index0"), Value(i)},
        {Value("revindex"), Value(n - i)},     {Value("revindex0"), Value(n - i - 1)},
        {Value("first"), Value(i == 0)},       {Value("last"), Value(i == n - 1)},
        {Value("length"), Value(n)},           {Value("depth"), Value(int64_t{1})},
        {Value("depth0"), Value(int64_t{0})},
        {Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item")},
        {Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item")},
        {Value("cycle"), Value::function("loop.cycle", [i](CallArgs& args, Interpreter&) {
           if (args.positional.empty()) throw EvalError("loop.cycle() needs at least one argument");
           return args.positional[static_cast<size_t>(i) % args.positional.size()];
         })}};
    iteration->set("loop", Value::dict(std::move(loop)));
    if (exec_body(node.body, iteration) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Node& node, const ScopePtr& scope) {
  Value value;
  if (node.kind == Node::Kind::SetBlock) {
    value = Value(capture(node.body, scope));
    for (const auto& filter : node.filters) {
      CallArgs args = eval_args(*filter, scope, 1);
      try {
        value = apply_filter(*this, filter->name, value, args);
      } catch (const EvalError& e) {
        throw_template_error(filter->line, filter->column, e.what());
      }
    }
  } else {
    value = eval(*node.expr, scope);
  }
  if (!node.attribute_target) {
    assign_targets(*scope, node.targets, value, node);
    return;
  }
  const Value* target = scope->lookup(node.targets[0]);
  if (target == nullptr || target->kind() != Kind::Namespace)
    throw_template_error(node.line, node.column,
                         "cannot assign attribute '" + node.targets[1] + "' on '" + node.targets[0] +
                             "': only namespace() objects take attribute assignments");
  try {
    check_namespace_item(value);
  } catch (const EvalError& e) {
    throw_template_error(node.line, node.column, e.what());
  }
  target->as_namespace().set(Value(node.targets[1]), std::move(value));
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  buffers_.emplace_back();
  exec_body(body, scope);
  std::string text = std::move(buffers_.back());
  buffers_.pop_back();
  return text;
}

void Interpreter::exec_generation(const Node& node, const ScopePtr& scope) {
  // transformers' AssistantTracker renders the block through caller() (a fresh scope), then records
  // (len(everything yielded at top level so far), + len(body)) and emits the body.
  const std::string body = capture(node.body, std::make_shared<Scope>(scope));
  const size_t start = buffers_.front().size();
  spans_.emplace_back(start, start + body.size());
  try {
    append_output(body);
  } catch (const EvalError& e) {
    throw_template_error(node.line, node.column, e.what());
  }
}

Value Interpreter::make_macro(const Node& node, const ScopePtr& scope) {
  const Node* macro = &node;
  macro_scopes_.push_back(scope);
  std::weak_ptr<Scope> defining = scope;
  return Value::function(node.name, [macro, defining](CallArgs& args, Interpreter& interp) -> Value {
    if (interp.macro_calls_ >= kMaxMacroCallDepth)
      throw EvalError("macro '" + macro->name + "': more than " + std::to_string(kMaxMacroCallDepth) +
                      " macro calls in progress at once, trlhpc's limit (kMaxMacroCallDepth): endless recursion?");
    ++interp.macro_calls_;
    struct Leave {
      int& calls;
      ~Leave() { --calls; }
    } leave{interp.macro_calls_};
    auto frame = std::make_shared<Scope>(defining.lock());
    if (args.positional.size() > macro->params.size())
      throw EvalError("macro '" + macro->name + "' takes " + std::to_string(macro->params.size()) +
                      " arguments, got " + std::to_string(args.positional.size()));
    for (const auto& [key, value] : args.keyword) {
      bool known = false;
      for (const auto& param : macro->params) known = known || param.first == key;
      if (!known) throw EvalError("macro '" + macro->name + "' has no parameter '" + key + "'");
    }
    for (size_t i = 0; i < macro->params.size(); ++i) {
      const auto& [name, fallback] = macro->params[i];
      if (args.has(i, name)) frame->set(name, args.get(i, name));
      else if (fallback) frame->set(name, interp.eval(*fallback, frame));
      else frame->set(name, Value::undefined("parameter '" + name + "' was not provided"));
    }
    return Value(interp.capture(macro->body, frame));
  });
}

}  // namespace trlhpc::chat_template
