#pragma once
// Chat templates: render a conversation to text exactly as transformers' `tokenizer.apply_chat_template(
// messages, tokenize=False, add_generation_prompt=...)` does, so trlhpc trains on TRL's tokens.
//
// transformers compiles `tokenizer_config.json`'s `chat_template` with jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) plus its AssistantTracker
// ({% generation %}) and loopcontrols extensions, its own `tojson` (json.dumps, ensure_ascii=False),
// and the globals raise_exception, strftime_now, namespace, dict. This is a C++ implementation of the
// part of Jinja2 chat templates use ({lexer,parser,interpreter}.hpp in this folder describe it):
//   {{ }}, {% %}, {# #}, `-`/`+` whitespace control, raw; if/elif/else, for (else, `if` filter, loop.*,
//   break/continue), set (tuples, namespace attributes, block form), macro, generation;
//   filters abs capitalize count d default first float indent int items join last length list lower
//   map reject rejectattr replace reverse round safe select selectattr string title tojson trim upper;
//   tests defined undefined none string mapping iterable sequence number integer float boolean true
//   false callable odd even divisibleby eq/equalto ne lt/lessthan le gt/greaterthan ge in lower upper
//   sameas; str/dict/list methods (strip, split, startswith, replace, title, items, get, count, ...);
//   Python operators including chained comparisons and printf-style 'fmt' % args.
// Anything else (include, extends, call blocks, filter blocks, unknown filters/tests) is a UserError
// naming the template line and column and the construct.
//
// Known differences from jinja2, none reachable by the templates models ship: `|safe` gives a plain
// string (Markup's escaping of the other operand of `+` is not modelled); `|reverse`, `|map`, `|select`
// give lists where jinja2 gives iterators (which only differ when printed); jinja2 constant-folds
// expressions made only of literals, turning e.g. `(1)[1:]` into Undefined instead of an error; case
// mapping covers Latin, Greek and Cyrillic only; integers are 64-bit.
//
// Variables the template sees, as apply_chat_template passes them: `messages` (each message's keys
// whose value is null dropped, and `reasoning_content`/`thinking` aliased as transformers >= 5 does),
// `add_generation_prompt`, `tools` and `documents` (None unless given), then everything in
// `extra_context` (bos_token, eos_token, ... : see load_special_tokens_context; tools; any kwargs).
//
// Key order: Python dicts keep insertion order, which shows in `tojson` and `.items()`. nlohmann::json
// sorts object keys; pass nlohmann::ordered_json to keep the order of the input file.
//
// Offsets: `text` is UTF-8 and every offset here counts bytes of it (transformers counts Python
// characters; the two agree after converting through the text).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trlhpc::chat_template {

struct Program;  // ast.hpp

struct RenderResult {
  std::string text;
  // [begin, end) byte ranges of what each {% generation %} block emitted, in template order
  // (transformers' `generation_indices`).
  std::vector<std::pair<size_t, size_t>> generation_spans;
};

class ChatTemplate {
 public:
  // Throws UserError("chat template line L, column C: ...") for syntax errors and unsupported constructs.
  static ChatTemplate parse(std::string source);

  RenderResult render(const nlohmann::json& messages, bool add_generation_prompt,
                      const nlohmann::json& extra_context = nlohmann::json::object()) const;
  RenderResult render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                      const nlohmann::ordered_json& extra_context = nlohmann::ordered_json::object()) const;

  // True when the template has {% generation %} blocks (transformers' return_assistant_tokens_mask
  // works only then).
  bool has_generation_blocks() const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const Program> program_;
};

// Which bytes of the rendered conversation (add_generation_prompt=false) are assistant output.
//  - Template with {% generation %}: exactly the generation spans, i.e. what transformers'
//    return_assistant_tokens_mask marks and TRL's assistant_only_loss trains on: the assistant turns'
//    content plus whatever the template puts inside the block (typically the end-of-turn token such as
//    <|im_end|>, not the role header).
//  - Template without: TRL refuses assistant_only_loss; trlhpc falls back to the rendered spans of
//    assistant content. Every message's string content (or text blocks) is located in order in the
//    rendered text, each search starting where the previous match ended (if the template trims content,
//    the stripped content is searched instead); the assistant ones are marked. End-of-turn tokens are
//    not included. Non-assistant content that is not rendered verbatim is skipped; assistant content
//    that cannot be found is a UserError naming the message (add {% generation %} to such a template).
struct AssistantCharMask {
  std::string text;           // the rendered conversation
  std::vector<uint8_t> mask;  // text.size() flags, 1 = assistant byte
  bool from_generation_blocks = false;
};
AssistantCharMask assistant_char_mask(const ChatTemplate& chat_template, const nlohmann::json& messages,
                                      const nlohmann::json& extra_context = nlohmann::json::object());
AssistantCharMask assistant_char_mask(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                                      const nlohmann::ordered_json& extra_context = nlohmann::ordered_json::object());

// The chat template a run uses, as TRL's SFTTrainer picks it:
//  - chat_template_path non-empty: a .jinja (any text) file is the template; a directory is read like a
//    tokenizer directory;
//  - otherwise tokenizer_dir: its chat_template.jinja if present, else tokenizer_config.json's
//    "chat_template" (a string, or a list of {"name", "template"} from which "default" is taken).
// Throws UserError naming the file when there is none.
std::string load_chat_template(const std::string& tokenizer_dir, const std::string& chat_template_path = "");
// The file load_chat_template reads the template from, for error messages ("" when there is none).
std::string chat_template_origin(const std::string& tokenizer_dir, const std::string& chat_template_path = "");

// The special-token variables apply_chat_template passes (tokenizer.special_tokens_map): bos_token,
// eos_token, unk_token, pad_token from tokenizer_config.json, each only when set (a string, or an
// AddedToken object's "content").
nlohmann::ordered_json load_special_tokens_context(const std::string& tokenizer_dir);

}  // namespace trlhpc::chat_template
