// ChatTemplate: parse once, render per conversation with apply_chat_template's variables; assistant
// masks; loading templates from tokenizer directories (see chat_template.hpp).
#include "trlhpc/data/chat_template/chat_template.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/interpreter.hpp"
#include "trlhpc/data/chat_template/text.hpp"

namespace trlhpc::chat_template {

ChatTemplate ChatTemplate::parse(std::string source) {
  ChatTemplate t;
  t.program_ = std::make_shared<const Program>(parse_template(tokenize_template(source)));
  t.source_ = std::move(source);
  return t;
}

bool ChatTemplate::has_generation_blocks() const { return program_ && program_->has_generation; }

namespace {

// transformers' _normalize_chat_messages (drop keys whose value is None) and _alias_reasoning_fields
// (copy the first of reasoning_content / thinking / reasoning to "thinking" (first key) and
// "reasoning_content").
template <class Json>
Value template_message(const Json& message, size_t index) {
  if (!message.is_object())
    throw UserError("chat message " + std::to_string(index) + " is not an object with \"role\" and \"content\" (got a JSON " +
                    std::string(message.type_name()) + ")");
  Dict plain;
  try {
    for (auto it = message.begin(); it != message.end(); ++it)
      if (!it.value().is_null()) plain.set(Value(it.key()), Value::from_json(it.value(), 2));
  } catch (const EvalError& e) {
    throw UserError("chat message " + std::to_string(index) + ": " + e.what());
  }
  const Value* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"})
    if (!reasoning) reasoning = plain.find(std::string(key));
  if (!reasoning) return Value::dict(std::move(plain.items));
  const Value r = *reasoning;
  const Value* thinking = plain.find(std::string("thinking"));
  Dict aliased;
  aliased.set(Value("thinking"), thinking ? *thinking : r);
  for (const auto& [k, v] : plain.items) aliased.set(k, v);
  aliased.set(Value("reasoning_content"), r);
  return Value::dict(std::move(aliased.items));
}

template <class Json>
RenderResult render_with(const Program& program, const Json& messages, bool add_generation_prompt,
                         const Json& extra_context) {
  if (!messages.is_array())
    throw UserError("chat template: messages must be a JSON array of {\"role\", \"content\"} objects, got " +
                    std::string(messages.type_name()));
  if (!extra_context.is_null() && !extra_context.is_object())
    throw UserError("chat template: the extra context must be a JSON object of template variables");
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  std::vector<Value> chat;
  for (size_t i = 0; i < messages.size(); ++i) chat.push_back(template_message(messages[i], i));
  globals->set("tools", Value());
  globals->set("documents", Value());
  globals->set("add_generation_prompt", Value(add_generation_prompt));
  try {
    globals->set("messages", Value::list(std::move(chat)));
    if (extra_context.is_object())
      for (auto it = extra_context.begin(); it != extra_context.end(); ++it)
        globals->set(it.key(), Value::from_json(it.value()));
  } catch (const EvalError& e) {
    throw UserError(std::string("chat template variables: ") + e.what());
  }
  Interpreter interpreter(program);
  RenderOutput out;
  try {
    out = interpreter.run(globals);
  } catch (const EvalError& e) {  // raised outside any expression (e.g. building a loop's `loop` object)
    throw UserError(std::string("chat template: ") + e.what());
  }
  return RenderResult{std::move(out.text), std::move(out.generation_spans)};
}

template <class Json>
AssistantCharMask mask_with(const ChatTemplate& chat_template, const Json& messages, const Json& extra_context) {
  AssistantCharMask result;
  RenderResult rendered = chat_template.render(messages, false, extra_context);
  result.text = std::move(rendered.text);
  result.mask.assign(result.text.size(), 0);
  if (chat_template.has_generation_blocks()) {
    result.from_generation_blocks = true;
    for (const auto& [begin, end] : rendered.generation_spans)
      for (size_t i = begin; i < end && i < result.mask.size(); ++i) result.mask[i] = 1;
    return result;
  }
  // Every message's content is located in order (so an assistant reply is never matched inside an
  // earlier user turn); only assistant content is marked. Content the template does not render
  // verbatim is skipped, except for assistant content, which must be found.
  size_t cursor = 0;
  auto locate = [&](const std::string& content, size_t message_index, bool is_assistant) {
    if (content.empty()) return;
    size_t hit = result.text.find(content, cursor);
    std::string found = content;
    if (hit == std::string::npos) {
      found = python_strip(content, std::nullopt, true, true);
      hit = found.empty() ? std::string::npos : result.text.find(found, cursor);
    }
    if (hit == std::string::npos) {
      if (!is_assistant) return;
      throw UserError("assistant mask: the content of message " + std::to_string(message_index) +
                      " (assistant) does not appear in the rendered chat; the template rewrites it, so the "
                      "assistant tokens cannot be located. Add {% generation %}...{% endgeneration %} around the "
                      "assistant content in the chat template (see --chat_template_path)");
    }
    if (is_assistant)
      for (size_t i = hit; i < hit + found.size(); ++i) result.mask[i] = 1;
    cursor = hit + found.size();
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object() || !m.contains("content")) continue;
    const bool is_assistant = m.contains("role") && m["role"] == "assistant";
    const auto& content = m["content"];
    if (content.is_string()) {
      locate(content.template get<std::string>(), i, is_assistant);
    } else if (content.is_array()) {
      for (const auto& block : content)
        if (block.is_object() && block.contains("text") && block["text"].is_string())
          locate(block["text"].template get<std::string>(), i, is_assistant);
    }
  }
  return result;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::ordered_json read_tokenizer_config(const std::filesystem::path& dir) {
  const auto path = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return nlohmann::ordered_json::object();
  try {
    return nlohmann::ordered_json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path.string() + " is not valid JSON: " + e.what());
  }
}

std::string template_from_directory(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "chat_template.jinja")) return read_text_file(dir / "chat_template.jinja");
  const auto config = read_tokenizer_config(dir);
  const auto where = (dir / "tokenizer_config.json").string();
  if (!config.contains("chat_template") || config["chat_template"].is_null())
    throw UserError("the tokenizer in " + dir.string() + " has no chat template (no chat_template.jinja, no "
                    "\"chat_template\" in tokenizer_config.json); pass --chat_template_path FILE.jinja");
  const auto& value = config["chat_template"];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string names;
    for (const auto& entry : value) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
      if (entry["name"] == "default") {
        if (!entry["template"].is_string()) throw UserError(where + ": the \"default\" chat template must be a string");
        return entry["template"].get<std::string>();
      }
      names += (names.empty() ? "" : ", ") + entry["name"].dump();
    }
    throw UserError(where + ": \"chat_template\" lists named templates (" + names +
                    ") but none is called \"default\"; pass --chat_template_path");
  }
  throw UserError(where + ": \"chat_template\" must be a string or a list of {\"name\", \"template\"}");
}

}  // namespace

RenderResult ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                  const nlohmann::json& extra_context) const {
  return render_with(*program_, messages, add_generation_prompt, extra_context);
}

RenderResult ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                  const nlohmann::ordered_json& extra_context) const {
  return render_with(*program_, messages, add_generation_prompt, extra_context);
}

AssistantCharMask assistant_char_mask(const ChatTemplate& chat_template, const nlohmann::json& messages,
                                      const nlohmann::json& extra_context) {
  return mask_with(chat_template, messages, extra_context);
}

AssistantCharMask assistant_char_mask(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                                      const nlohmann::ordered_json& extra_context) {
  return mask_with(chat_template, messages, extra_context);
}

std::string load_chat_template(const std::string& tokenizer_dir, const std::string& chat_template_path) {
  if (!chat_template_path.empty()) {
    const std::filesystem::path path(chat_template_path);
    if (!std::filesystem::exists(path))
      throw UserError("--chat_template_path " + chat_template_path + " does not exist");
    if (std::filesystem::is_directory(path)) return template_from_directory(path);
    return read_text_file(path);
  }
  return template_from_directory(std::filesystem::path(tokenizer_dir));
}

std::string chat_template_origin(const std::string& tokenizer_dir, const std::string& chat_template_path) {
  std::filesystem::path dir(tokenizer_dir);
  if (!chat_template_path.empty()) {
    if (!std::filesystem::is_directory(chat_template_path)) return chat_template_path;
    dir = chat_template_path;
  }
  if (std::filesystem::exists(dir / "chat_template.jinja")) return (dir / "chat_template.jinja").string();
  return (dir / "tokenizer_config.json").string();
}

nlohmann::ordered_json load_special_tokens_context(const std::string& tokenizer_dir) {
  const auto config = read_tokenizer_config(std::filesystem::path(tokenizer_dir));
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!config.contains(key)) continue;
    const auto& token = config[key];
    if (token.is_string()) context[key] = token;
    else if (token.is_object() && token.contains("content") && token["content"].is_string()) context[key] = token["content"];
  }
  return context;
}

}  // namespace trlhpc::chat_template
