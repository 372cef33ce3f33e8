#pragma once
// Chat-template lexer: splits template source into text and tag tokens with the whitespace rules
// transformers configures (jinja2 Environment(trim_blocks=True, lstrip_blocks=True), default
// keep_trailing_newline=False), mirroring jinja2.lexer.Lexer.tokeniter:
//   - line endings \r\n and \r become \n, and one trailing newline of the template is dropped;
//   - trim_blocks: the first newline right after a block tag `%}` or comment `#}` is removed
//     (`+%}` keeps it);
//   - lstrip_blocks: spaces/tabs from the start of a line up to a `{%` or `{#` are removed, when only
//     whitespace precedes the tag on its line (`{%+` keeps them; `{{` is never lstripped);
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all after it;
//   - comments are dropped; `{% raw %}...{% endraw %}` becomes text.
// Inside a tag: names, strings (Python escapes), integers (0b/0o/0x, `_` separators), floats, and the
// operators of jinja2. `}}` / `%}` only close a tag when brackets are balanced ({{ {'a': {}} }}).
#include <string>
#include <vector>

namespace trlhpc::chat_template {

enum class TokenKind { Text, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenKind kind;
  std::string value;  // Text: the text; String: the unescaped value; Name/Integer/Float/Operator: the lexeme
  int line = 1;       // 1-based position of the token's first character in the template
  int column = 1;     // 1-based, in code points
};

// Throws UserError("chat template line L, column C: ...") on a malformed template (unterminated tag,
// comment or string, unexpected character, unbalanced bracket).
std::vector<Token> tokenize_template(const std::string& source);

// Formats the position prefix every template error uses.
std::string template_location(int line, int column);
[[noreturn]] void throw_template_error(int line, int column, const std::string& message);

}  // namespace trlhpc::chat_template
