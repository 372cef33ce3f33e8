// Statement parsing and the token cursor (reference: jinja2/parser.py, jinja2/ext.py for loop controls,
// transformers' AssistantTracker for {% generation %}).
#include <algorithm>

#include "trlhpc/data/chat_template/parser.hpp"

namespace trlhpc::chat_template {

namespace {
const char* const kUnsupportedStatements[] = {"block", "extends", "include", "import", "from", "call", "filter",
                                             "with", "autoescape", "do", "trans", "pluralize", "endblock",
                                             "endcall", "endfilter", "endwith", "endautoescape", "endtrans"};
}  // namespace

Program parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_program(); }

Program Parser::parse_program() {
  Program program;
  program.body = parse_body({}, nullptr);
  program.has_generation = has_generation_;
  return program;
}

// ---------------------------------------------------------------------------------------------------
// Token cursor

const Token& Parser::peek(size_t ahead) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }

bool Parser::at_operator(const char* op) const {
  return current().kind == TokenKind::Operator && current().value == op;
}

bool Parser::at_name(const char* name) const { return current().kind == TokenKind::Name && current().value == name; }

bool Parser::skip_operator(const char* op) {
  if (!at_operator(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

const Token& Parser::expect_operator(const char* op) {
  if (!at_operator(op)) fail(current(), std::string("expected '") + op + "', got " + describe(current()));
  return next();
}

const Token& Parser::expect_name() {
  if (current().kind != TokenKind::Name) fail(current(), "expected a name, got " + describe(current()));
  return next();
}

void Parser::expect_block_end() {
  if (current().kind != TokenKind::BlockEnd)
    fail(current(), "expected the end of the statement ('%}'), got " + describe(current()));
  next();
}

void Parser::fail(const Token& at, const std::string& message) const {
  throw_template_error(at.line, at.column, message);
}

std::string Parser::describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::End: return "the end of the template";
    case TokenKind::Text: return "template text";
    case TokenKind::BlockEnd: return "'%}'";
    case TokenKind::VariableEnd: return "'}}'";
    case TokenKind::String: return "string '" + t.value + "'";
    default: return "'" + t.value + "'";
  }
}

// ---------------------------------------------------------------------------------------------------
// Statements

Body Parser::parse_body(const std::vector<std::string>& end_names, const Token* opener) {
  Body body;
  while (true) {
    const Token& t = current();
    if (t.kind == TokenKind::End) {
      if (opener == nullptr) return body;
      std::string expected;
      for (const auto& name : end_names) expected += (expected.empty() ? "{% " : " or {% ") + name + " %}";
      fail(*opener, "the '{% " + opener->value + " %}' block opened here is never closed: the template ends "
                        "before " + expected);
    }
    if (t.kind == TokenKind::Text) {
      auto node = make<Node>(Node::Kind::Text, t);
      node->text = t.value;
      body.push_back(std::move(node));
      next();
    } else if (t.kind == TokenKind::VariableBegin) {
      next();
      auto node = make<Node>(Node::Kind::Output, current());
      node->expr = parse_tuple(true);
      if (current().kind != TokenKind::VariableEnd)
        fail(current(), "expected the end of the expression ('}}'), got " + describe(current()));
      next();
      body.push_back(std::move(node));
    } else if (t.kind == TokenKind::BlockBegin) {
      next();
      if (current().kind != TokenKind::Name) fail(current(), "expected a statement name after '{%', got " + describe(current()));
      if (std::find(end_names.begin(), end_names.end(), current().value) != end_names.end()) return body;
      body.push_back(parse_statement());
    } else {
      fail(t, "unexpected " + describe(t));
    }
  }
}

NodePtr Parser::parse_statement() {
  const Nesting nesting(*this, current());
  const Token tag = next();
  const std::string& name = tag.value;
  if (name == "if") return parse_if(tag);
  if (name == "for") return parse_for(tag);
  if (name == "set") return parse_set(tag);
  if (name == "macro") return parse_macro(tag);
  if (name == "generation") return parse_generation(tag);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) fail(tag, "'{% " + name + " %}' outside of a for loop");
    expect_block_end();
    return make<Node>(name == "break" ? Node::Kind::Break : Node::Kind::Continue, tag);
  }
  for (const char* unsupported : kUnsupportedStatements)
    if (name == unsupported)
      fail(tag, "unsupported statement '{% " + name + " %}': trlhpc's chat-template engine supports if/elif/else, "
                    "for (with loop.*, break, continue), set, macro and generation");
  if (name.rfind("end", 0) == 0 || name == "else" || name == "elif")
    fail(tag, "unexpected '{% " + name + " %}': no open block it could close");
  fail(tag, "unknown statement '{% " + name + " %}'");
}

NodePtr Parser::parse_if(const Token& tag) {
  auto node = make<Node>(Node::Kind::If, tag);
  ExprPtr condition = parse_tuple(false);
  expect_block_end();
  node->branches.emplace_back(std::move(condition), parse_body({"elif", "else", "endif"}, &tag));
  while (true) {
    const std::string keyword = next().value;
    if (keyword == "elif") {
      ExprPtr elif_condition = parse_tuple(false);
      expect_block_end();
      node->branches.emplace_back(std::move(elif_condition), parse_body({"elif", "else", "endif"}, &tag));
    } else if (keyword == "else") {
      expect_block_end();
      node->branches.emplace_back(nullptr, parse_body({"endif"}, &tag));
      next();
      expect_block_end();
      return node;
    } else {
      expect_block_end();
      return node;
    }
  }
}

NodePtr Parser::parse_for(const Token& tag) {
  auto node = make<Node>(Node::Kind::For, tag);
  const bool parenthesized = skip_operator("(");
  do {
    node->targets.push_back(expect_name().value);
  } while (skip_operator(","));
  if (parenthesized) expect_operator(")");
  if (!skip_name("in")) fail(current(), "expected 'in' in the for loop, got " + describe(current()));
  node->expr = parse_tuple(false);
  if (skip_name("if")) node->condition = parse_expression(true);
  if (at_name("recursive")) fail(current(), "recursive for loops are not supported");
  expect_block_end();
  ++loop_depth_;
  const size_t body_begin = pos_;
  node->body = parse_body({"endfor", "else"}, &tag);
  --loop_depth_;
  // Building `loop` is most of an iteration's cost; a body that never names it does without.
  node->uses_loop = std::any_of(tokens_.begin() + static_cast<std::ptrdiff_t>(body_begin),
                                tokens_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                [](const Token& t) { return t.kind == TokenKind::Name && t.value == "loop"; });
  if (next().value == "else") {
    expect_block_end();
    node->else_body = parse_body({"endfor"}, &tag);
    next();
  }
  expect_block_end();
  return node;
}

NodePtr Parser::parse_set(const Token& tag) {
  auto node = make<Node>(Node::Kind::Set, tag);
  const Token first = expect_name();
  node->targets.push_back(first.value);
  if (at_operator(".")) {
    next();
    node->targets.push_back(expect_name().value);
    node->attribute_target = true;
  } else {
    while (skip_operator(",")) node->targets.push_back(expect_name().value);
  }
  if (skip_operator("=")) {
    node->expr = parse_tuple(true);
    expect_block_end();
    return node;
  }
  if (node->attribute_target || node->targets.size() != 1)
    fail(current(), "expected '=' after the assignment target, got " + describe(current()));
  node->kind = Node::Kind::SetBlock;
  while (at_operator("|")) node->filters.push_back(parse_filter(nullptr));
  expect_block_end();
  node->body = parse_body({"endset"}, &tag);
  next();
  expect_block_end();
  return node;
}

NodePtr Parser::parse_macro(const Token& tag) {
  auto node = make<Node>(Node::Kind::Macro, tag);
  node->name = expect_name().value;
  expect_operator("(");
  while (!at_operator(")")) {
    if (!node->params.empty()) expect_operator(",");
    const Token param = expect_name();
    ExprPtr fallback;
    if (skip_operator("=")) fallback = parse_expression();
    else if (!node->params.empty() && node->params.back().second)
      fail(param, "macro parameter '" + param.value + "' without a default follows one with a default");
    node->params.emplace_back(param.value, std::move(fallback));
  }
  next();
  expect_block_end();
  const int saved_depth = loop_depth_;
  loop_depth_ = 0;
  node->body = parse_body({"endmacro"}, &tag);
  loop_depth_ = saved_depth;
  next();
  expect_block_end();
  return node;
}

NodePtr Parser::parse_generation(const Token& tag) {
  auto node = make<Node>(Node::Kind::Generation, tag);
  has_generation_ = true;
  expect_block_end();
  node->body = parse_body({"endgeneration"}, &tag);
  next();
  expect_block_end();
  return node;
}

}  // namespace trlhpc::chat_template
