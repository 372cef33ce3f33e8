#pragma once
// Evaluates a parsed chat template (ast.hpp) the way jinja2's compiled template runs in
// transformers' ImmutableSandboxedEnvironment:
//   - scopes: a for-loop iteration, a macro call and a {% generation %} body each get a fresh scope
//     whose lookups fall back to the enclosing one, so `{% set %}` inside them is not seen outside
//     (that is why templates use namespace()); `if` does not open a scope;
//   - Undefined (a missing name, key or attribute) renders as "", is falsy and iterates as empty, but
//     attribute access, arithmetic, ordering or calling it fails with "'x' is undefined";
//   - {% generation %}...{% endgeneration %} appends its body's output and records the span it occupies
//     in the top-level output, exactly as transformers' AssistantTracker computes it (start = length of
//     everything emitted at top level so far).
// Filters, tests, methods and globals live in their own files; they report failures by throwing
// EvalError, which eval() turns into a UserError naming the innermost expression's line and column.
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trlhpc/data/chat_template/ast.hpp"

namespace trlhpc::chat_template {

// The message of raise_exception(...): kept apart so the UserError can quote it verbatim.
class RaisedException : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

class Scope {
 public:
  explicit Scope(ScopePtr parent = nullptr) : parent_(std::move(parent)) {}
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  ScopePtr parent_;
  std::unordered_map<std::string, Value> vars_;
};

struct RenderOutput {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation_spans;  // byte offsets into text, [begin, end)
};

class Interpreter {
 public:
  explicit Interpreter(const Program& program) : program_(program) {}

  RenderOutput run(ScopePtr globals);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  Value get_attribute(const Value& object, const std::string& name);
  Value get_item(const Value& object, const Value& key);

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, const ScopePtr& scope);
  Flow exec(const Node& node, const ScopePtr& scope);
  Flow exec_for(const Node& node, const ScopePtr& scope);
  void exec_set(const Node& node, const ScopePtr& scope);
  void exec_generation(const Node& node, const ScopePtr& scope);
  Value make_macro(const Node& node, const ScopePtr& scope);
  std::string capture(const Body& body, const ScopePtr& scope);

  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope, size_t first_positional);

  std::string& out() { return buffers_.back(); }
  void append_output(const std::string& text);

  // Adds `steps` to this render's count; EvalError past kMaxRenderSteps.
  void charge(uint64_t steps);

  // Counts one evaluation level and one step (limits.hpp); the destructor leaves the level.
  class Level {
   public:
    explicit Level(Interpreter& interp);
    ~Level() { --interp_.depth_; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;

   private:
    Interpreter& interp_;
  };

  const Program& program_;
  std::vector<std::string> buffers_;  // [0] is the template's output; more while capturing
  std::vector<std::pair<size_t, size_t>> spans_;
  // Scopes that define macros, kept for the whole render: a macro refers to its defining scope weakly
  // (the scope also holds the macro), so it must not die before the macro's last call.
  std::vector<ScopePtr> macro_scopes_;
  int depth_ = 0;             // statements and expressions being evaluated (kMaxEvaluationDepth)
  int macro_calls_ = 0;       // macro calls in progress (kMaxMacroCallDepth)
  int64_t steps_ = 0;         // evaluated so far in this render (kMaxRenderSteps)
};

// EvalError when `value` holds a namespace(): a namespace attribute may not (it could then hold itself).
void check_namespace_item(const Value& value);

// ---- operators (operators.cpp): Python semantics, EvalError on type errors
Value binary_operator(const std::string& op, const Value& a, const Value& b);
// Python ordering for < <= > >=; EvalError for unorderable types.
bool less_than(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // Python `item in container`
// The items a `for` loop, list() or join() visits: list items, dict keys, string characters; Undefined
// gives none. EvalError for values that are not iterable.
std::vector<Value> iterate(const Value& v);
// Python len(); EvalError when the value has none.
int64_t length_of(const Value& v);
[[noreturn]] void throw_undefined(const Value& undefined);

// ---- filters, tests (filters.cpp, tests.cpp)
Value apply_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Interpreter& interp, const std::string& name, const Value& subject, CallArgs& args);

// ---- methods and globals (builtins.cpp)
// The bound method `object.name` ('abc'.strip, dict.items, ...), or Undefined when there is none.
Value bound_method(const Value& object, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now.
void install_globals(Scope& scope);

// ---- JSON (json.cpp): Python's json.dumps, as transformers' tojson filter calls it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;                // used when has_indent
  std::string item_separator = ", "; // json.dumps default: ", " without indent, "," with indent
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string python_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace trlhpc::chat_template
