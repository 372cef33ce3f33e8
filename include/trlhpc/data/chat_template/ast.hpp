#pragma once
// The parsed form of a chat template: expression and statement trees, as jinja2.parser builds them for
// the subset chat templates use. Every node keeps the line/column of its first token so evaluation
// errors can name where they happened.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trlhpc/data/chat_template/lexer.hpp"
#include "trlhpc/data/chat_template/value.hpp"

namespace trlhpc::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

// Operands live in `operands`; which ones depends on the kind:
//   Literal      value                          Name      name
//   ListLit      operands = items               TupleLit  operands = items
//   DictLit      operands = key0, value0, key1, value1, ...
//   Attribute    operands = {object}, name = attribute
//   Subscript    operands = {object, index}
//   Slice        operands = {object, start, stop, step} (absent bounds are null)
//   Call         operands = {callee, positional...}, keywords
//   Filter       operands = {input, positional...}, keywords, name = filter
//   Test         operands = {subject, positional...}, keywords, name = test, negated for `is not`
//   Unary        operands = {x}, name = "-" | "+" | "not"
//   Binary       operands = {lhs, rhs}, name = "+" "-" "*" "/" "//" "%" "**" "~" "and" "or"
//   Compare      operands = {first, second, ...}, comparisons[i] joins operands i and i+1
//                ("==", "!=", "<", "<=", ">", ">=", "in", "notin"), chained like Python
//   Conditional  operands = {value_if_true, condition, value_if_false or null}
struct Expr {
  enum class Kind { Literal, Name, ListLit, TupleLit, DictLit, Attribute, Subscript, Slice, Call, Filter, Test,
                    Unary, Binary, Compare, Conditional };
  Kind kind;
  int line = 0, column = 0;
  int depth = 1;  // levels of this tree: 1 + the deepest operand (at most kMaxTemplateNesting)
  Value value;
  std::string name;
  std::vector<ExprPtr> operands;
  KeywordArgs keywords;
  std::vector<std::string> comparisons;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// Statements:
//   Text        text
//   Output      expr                               ({{ expr }})
//   If          branches: (condition, body)...; an `else` branch has a null condition
//   For         targets (loop variables), expr (iterable), condition (`if` filter or null), body,
//               else_body
//   Set         targets (names, or {namespace, attribute} when attribute_target), expr
//   SetBlock    targets = {name}, body, filters (applied to the captured text, e.g. {% set x | trim %})
//   Macro       name, params (name, default or null), body
//   Generation  body (transformers' {% generation %} block: its output span is recorded)
//   Break / Continue
struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Generation, Break, Continue };
  Kind kind;
  int line = 0, column = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  bool attribute_target = false;
  bool uses_loop = true;  // For: the body names `loop` (else the loop object is not built)
  std::vector<std::pair<std::string, ExprPtr>> params;
  std::vector<ExprPtr> filters;  // SetBlock: Filter expressions whose input is a placeholder
  Body body;
  Body else_body;
};

struct Program {
  Body body;
  bool has_generation = false;
};

// Parses tokens from tokenize_template. Throws UserError naming the line/column and the construct for
// syntax errors, unknown filters/tests, unclosed blocks and unsupported statements.
Program parse_template(const std::vector<Token>& tokens);

// Filters and tests the evaluator implements (checked at parse time, as jinja2 does).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);
std::string known_filters_list();
std::string known_tests_list();

}  // namespace trlhpc::chat_template
