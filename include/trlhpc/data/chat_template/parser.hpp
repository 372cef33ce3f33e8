#pragma once
// The recursive-descent parser behind parse_template, split over two files: expressions
// (parse_expr.cpp) and statements (parse_stmt.cpp). The grammar and
// precedence are jinja2.parser.Parser's, loosest first:
//   conditional  x if c else y            (not inside `if`/`for` headers, as in jinja2)
//   or, and, not
//   compare      == != < <= > >= in `not in` (chained)
//   + -   then  ~   then  * / // %   then  **
//   unary - +, then primary with postfix .attr [index] [a:b:c] (call), then | filter, `is` test
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "trlhpc/data/chat_template/ast.hpp"

namespace trlhpc::chat_template {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Program parse_program();

  // ---- expressions (parse_expr.cpp)
  ExprPtr parse_tuple(bool with_conditional, bool explicit_parentheses = false);
  ExprPtr parse_expression(bool with_conditional = true);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  // One left-associative binary level: operand (op operand)*, op one of `ops` (keywords such as "or"
  // when `keywords`, operator tokens otherwise).
  ExprPtr parse_binary_level(const std::function<ExprPtr()>& operand, std::initializer_list<const char*> ops,
                             bool keywords);
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  // `callee(args)` at the '(': a Call node positioned there (after a primary, and after a filter or
  // test, as jinja2 allows `x|f(1)(2)`).
  ExprPtr parse_call(ExprPtr callee);
  // `(args)`: positional arguments appended to `positional`, `name=value` ones to `keywords`.
  void parse_call_args(std::vector<ExprPtr>& positional, KeywordArgs& keywords);

  // ---- statements (parse_stmt.cpp)
  // Parses nodes until a block tag whose name is in `end_names` (left unconsumed, cursor on its name) or
  // the end of the template (an error naming `opener` when end_names is non-empty).
  Body parse_body(const std::vector<std::string>& end_names, const Token* opener);
  NodePtr parse_statement();
  NodePtr parse_if(const Token& tag);
  NodePtr parse_for(const Token& tag);
  NodePtr parse_set(const Token& tag);
  NodePtr parse_macro(const Token& tag);
  NodePtr parse_generation(const Token& tag);

  // ---- token cursor
  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const;
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool at_operator(const char* op) const;
  bool at_name(const char* name) const;
  bool skip_operator(const char* op);
  bool skip_name(const char* name);
  const Token& expect_operator(const char* op);
  const Token& expect_name();
  void expect_block_end();
  [[noreturn]] void fail(const Token& at, const std::string& message) const;
  static std::string describe(const Token& t);

  // Sets `node`'s depth from its operands; a UserError when it exceeds kMaxTemplateNesting (the
  // evaluator and the destructor recurse once per level).
  ExprPtr finish(ExprPtr node) const;
  int64_t integer_literal(const Token& token) const;

  // One level of recursion in the parser (a bracket, `not`, unary sign or nested block); a UserError
  // at `at` past kMaxTemplateNesting.
  class Nesting {
   public:
    Nesting(Parser& parser, const Token& at);
    ~Nesting() { --parser_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& parser_;
  };

  template <class T>
  static std::unique_ptr<T> make(typename T::Kind kind, const Token& at) {
    auto node = std::make_unique<T>();
    node->kind = kind;
    node->line = at.line;
    node->column = at.column;
    return node;
  }

 private:
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  bool has_generation_ = false;
  int loop_depth_ = 0;
  int nesting_ = 0;     // open Nesting levels  // `break`/`continue` are only valid inside a for loop (not across a macro)
};

}  // namespace trlhpc::chat_template
