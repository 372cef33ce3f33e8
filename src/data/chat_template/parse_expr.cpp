// Expression parsing (grammar in parser.hpp; reference: jinja2/parser.py).
#include <cstdlib>

#include <algorithm>
#include <cerrno>

#include "trlhpc/data/chat_template/limits.hpp"
#include "trlhpc/data/chat_template/parser.hpp"

namespace trlhpc::chat_template {

namespace {
ExprPtr binary(const Token& at, const std::string& op, ExprPtr lhs, ExprPtr rhs) {
  auto node = Parser::make<Expr>(Expr::Kind::Binary, at);
  node->name = op;
  node->operands.push_back(std::move(lhs));
  node->operands.push_back(std::move(rhs));
  return node;
}

std::string nesting_message() {
  return "the template nests more than " + std::to_string(kMaxTemplateNesting) +
         " levels deep (brackets, operators, 'not', nested blocks), trlhpc's limit (kMaxTemplateNesting)";
}
}  // namespace

Parser::Nesting::Nesting(Parser& parser, const Token& at) : parser_(parser) {
  if (parser_.nesting_ + 1 > kMaxTemplateNesting) parser_.fail(at, nesting_message());
  ++parser_.nesting_;
}

ExprPtr Parser::finish(ExprPtr node) const {
  int depth = 1;
  for (const auto& operand : node->operands)
    if (operand) depth = std::max(depth, operand->depth + 1);
  for (const auto& [key, value] : node->keywords)
    if (value) depth = std::max(depth, value->depth + 1);
  node->depth = depth;
  if (depth > kMaxTemplateNesting) {
    Token at{TokenKind::End, "", node->line, node->column};
    fail(at, nesting_message());
  }
  return node;
}

// A decimal integer literal; a UserError when it does not fit in 64 bits (Python's would not overflow).
int64_t Parser::integer_literal(const Token& token) const {
  errno = 0;
  const long long value = std::strtoll(token.value.c_str(), nullptr, 10);
  if (errno == ERANGE)
    fail(token, "integer literal " + token.value + " does not fit in 64 bits (trlhpc's chat-template integers are 64-bit)");
  return value;
}

ExprPtr Parser::parse_tuple(bool with_conditional, bool explicit_parentheses) {
  const Token start = current();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_operator(",");
    const Token& t = current();
    if (t.kind == TokenKind::VariableEnd || t.kind == TokenKind::BlockEnd || at_operator(")")) break;
    items.push_back(parse_expression(with_conditional));
    if (at_operator(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) fail(current(), "expected an expression, got " + describe(current()));
  }
  auto node = make<Expr>(Expr::Kind::TupleLit, start);
  node->operands = std::move(items);
  return finish(std::move(node));
}

ExprPtr Parser::parse_expression(bool with_conditional) {
  const Nesting nesting(*this, current());
  if (!with_conditional) return parse_or();
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    const Token at = next();
    auto node = make<Expr>(Expr::Kind::Conditional, at);
    ExprPtr condition = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
    node->operands.push_back(std::move(expr));
    node->operands.push_back(std::move(condition));
    node->operands.push_back(std::move(otherwise));
    expr = finish(std::move(node));
  }
  return expr;
}

ExprPtr Parser::parse_binary_level(const std::function<ExprPtr()>& operand, std::initializer_list<const char*> ops,
                                   bool keywords) {
  ExprPtr left = operand();
  while (true) {
    const char* op = nullptr;
    for (const char* candidate : ops)
      if (keywords ? at_name(candidate) : at_operator(candidate)) op = candidate;
    if (!op) return left;
    const Token at = next();
    left = finish(binary(at, op, std::move(left), operand()));
  }
}

ExprPtr Parser::parse_or() { return parse_binary_level([this] { return parse_and(); }, {"or"}, true); }

ExprPtr Parser::parse_and() { return parse_binary_level([this] { return parse_not(); }, {"and"}, true); }

ExprPtr Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  const Nesting nesting(*this, current());
  const Token at = next();
  auto node = make<Expr>(Expr::Kind::Unary, at);
  node->name = "not";
  node->operands.push_back(parse_not());
  return finish(std::move(node));
}

ExprPtr Parser::parse_compare() {
  const Token start = current();
  ExprPtr first = parse_math1();
  std::unique_ptr<Expr> node;
  static const char* const kOps[] = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    for (const char* candidate : kOps)
      if (at_operator(candidate)) op = candidate;
    if (!op.empty()) {
      next();
    } else if (at_name("in")) {
      next();
      op = "in";
    } else if (at_name("not") && peek().kind == TokenKind::Name && peek().value == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!node) {
      node = make<Expr>(Expr::Kind::Compare, start);
      node->operands.push_back(std::move(first));
    }
    node->comparisons.push_back(op);
    node->operands.push_back(parse_math1());
  }
  return node ? finish(std::move(node)) : std::move(first);
}

ExprPtr Parser::parse_math1() { return parse_binary_level([this] { return parse_concat(); }, {"+", "-"}, false); }

ExprPtr Parser::parse_concat() { return parse_binary_level([this] { return parse_math2(); }, {"~"}, false); }

ExprPtr Parser::parse_math2() {
  return parse_binary_level([this] { return parse_pow(); }, {"*", "/", "//", "%"}, false);
}

ExprPtr Parser::parse_pow() { return parse_binary_level([this] { return parse_unary(); }, {"**"}, false); }

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    const Nesting nesting(*this, current());
    const Token at = next();
    node = make<Expr>(Expr::Kind::Unary, at);
    node->name = at.value;
    node->operands.push_back(parse_unary(false));
    node = finish(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token token = current();
  ExprPtr node;
  if (token.kind == TokenKind::Name) {
    next();
    node = make<Expr>(Expr::Kind::Literal, token);
    if (token.value == "true" || token.value == "True") node->value = Value(true);
    else if (token.value == "false" || token.value == "False") node->value = Value(false);
    else if (token.value == "none" || token.value == "None") node->value = Value();
    else {
      node->kind = Expr::Kind::Name;
      node->name = token.value;
    }
  } else if (token.kind == TokenKind::String) {
    std::string text;
    while (current().kind == TokenKind::String) text += next().value;  // adjacent literals concatenate
    node = make<Expr>(Expr::Kind::Literal, token);
    node->value = Value(std::move(text));
  } else if (token.kind == TokenKind::Integer || token.kind == TokenKind::Float) {
    next();
    node = make<Expr>(Expr::Kind::Literal, token);
    if (token.kind == TokenKind::Integer) node->value = Value(integer_literal(token));
    else node->value = Value(std::strtod(token.value.c_str(), nullptr));
  } else if (at_operator("(")) {
    next();
    node = parse_tuple(true, /*explicit_parentheses=*/true);
    expect_operator(")");
  } else if (at_operator("[") || at_operator("{")) {
    const bool is_dict = at_operator("{");
    const char* close = is_dict ? "}" : "]";
    next();
    node = make<Expr>(is_dict ? Expr::Kind::DictLit : Expr::Kind::ListLit, token);
    while (!at_operator(close)) {
      if (!node->operands.empty()) expect_operator(",");
      if (at_operator(close)) break;
      node->operands.push_back(parse_expression());
      if (is_dict) {
        expect_operator(":");
        node->operands.push_back(parse_expression());
      }
    }
    expect_operator(close);
    node = finish(std::move(node));
  } else {
    fail(token, "unexpected " + describe(token));
  }
  return node;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".") || at_operator("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      node = parse_filter(std::move(node));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr node) {
  expect_operator("|");
  const Token name = expect_name();
  if (at_operator(".")) fail(current(), "dotted filter names are not supported");
  if (!is_known_filter(name.value))
    fail(name, "unknown filter '" + name.value + "' (supported filters: " + known_filters_list() + ")");
  auto filter = make<Expr>(Expr::Kind::Filter, name);
  filter->name = name.value;
  filter->operands.push_back(std::move(node));
  if (at_operator("(")) parse_call_args(filter->operands, filter->keywords);
  return finish(std::move(filter));
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const Token is = next();
  const bool negated = skip_name("not");
  const Token name = expect_name();
  if (at_operator(".")) fail(current(), "dotted test names are not supported");
  if (!is_known_test(name.value))
    fail(name, "unknown test '" + name.value + "' (supported tests: " + known_tests_list() + ")");
  auto test = make<Expr>(Expr::Kind::Test, is);
  test->name = name.value;
  test->negated = negated;
  test->operands.push_back(std::move(node));
  const Token& t = current();
  const bool starts_primary = t.kind == TokenKind::Name || t.kind == TokenKind::String ||
                              t.kind == TokenKind::Integer || t.kind == TokenKind::Float || at_operator("[") ||
                              at_operator("{");
  if (at_operator("(")) {
    parse_call_args(test->operands, test->keywords);
  } else if (starts_primary && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail(t, "tests cannot be chained with 'is'");
    test->operands.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
  }
  return finish(std::move(test));
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token token = next();
  if (token.value == ".") {
    const Token attr = next();
    if (attr.kind == TokenKind::Name) {
      auto out = make<Expr>(Expr::Kind::Attribute, token);
      out->name = attr.value;
      out->operands.push_back(std::move(node));
      return finish(std::move(out));
    }
    if (attr.kind != TokenKind::Integer) fail(attr, "expected a name or number after '.', got " + describe(attr));
    auto out = make<Expr>(Expr::Kind::Subscript, token);
    auto index = make<Expr>(Expr::Kind::Literal, attr);
    index->value = Value(integer_literal(attr));
    out->operands.push_back(std::move(node));
    out->operands.push_back(std::move(index));
    return finish(std::move(out));
  }
  // '[' index ']' or '[' start? ':' stop? (':' step?)? ']'
  std::vector<ExprPtr> bounds;
  bool is_slice = false;
  if (!at_operator(":")) bounds.push_back(parse_expression());
  else bounds.push_back(nullptr);
  if (at_operator(":")) {
    is_slice = true;
    next();
    bounds.push_back(at_operator(":") || at_operator("]") ? nullptr : parse_expression());
    if (skip_operator(":")) bounds.push_back(at_operator("]") ? nullptr : parse_expression());
    else bounds.push_back(nullptr);
  }
  if (at_operator(",")) fail(current(), "subscripts with several indices (x[a, b]) are not supported");
  expect_operator("]");
  auto out = make<Expr>(is_slice ? Expr::Kind::Slice : Expr::Kind::Subscript, token);
  out->operands.push_back(std::move(node));
  for (auto& b : bounds) out->operands.push_back(std::move(b));
  return finish(std::move(out));
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto call = make<Expr>(Expr::Kind::Call, current());
  call->operands.push_back(std::move(callee));
  parse_call_args(call->operands, call->keywords);
  return finish(std::move(call));
}

void Parser::parse_call_args(std::vector<ExprPtr>& positional, KeywordArgs& keywords) {
  expect_operator("(");
  bool require_comma = false;
  while (!at_operator(")")) {
    if (require_comma) {
      expect_operator(",");
      if (at_operator(")")) break;
    }
    if (at_operator("*") || at_operator("**")) fail(current(), "*args / **kwargs in calls are not supported");
    if (current().kind == TokenKind::Name && peek().kind == TokenKind::Operator && peek().value == "=") {
      const std::string key = next().value;
      next();
      keywords.emplace_back(key, parse_expression());
    } else {
      if (!keywords.empty()) fail(current(), "a positional argument follows a keyword argument");
      positional.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_operator(")");
}

}  // namespace trlhpc::chat_template
