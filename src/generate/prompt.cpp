#include "trlhpc/generate/prompt.hpp"

#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"

namespace trlhpc {

bool has_chat_template(const PromptSource& source, const tokenizer::Tokenizer& tokenizer) {
  return !source.chat_template_path.empty() || !tokenizer.chat_template().empty() ||
         std::filesystem::exists(std::filesystem::path(source.tokenizer_dir) / "chat_template.jinja");
}

std::vector<int32_t> chat_prompt_ids(const nlohmann::ordered_json& messages, const PromptSource& source,
                                     const tokenizer::Tokenizer& tokenizer) {
  if (!messages.is_array() || messages.empty())
    throw UserError("--messages: expected a non-empty JSON list of {\"role\": ..., \"content\": ...}");
  if (!has_chat_template(source, tokenizer))
    throw UserError("--messages: the tokenizer in " + source.tokenizer_dir +
                    " has no chat template; pass --chat_template_path FILE or a plain --prompt");
  const auto chat = chat_template::ChatTemplate::parse(
      chat_template::load_chat_template(source.tokenizer_dir, source.chat_template_path));
  nlohmann::ordered_json context = chat_template::load_special_tokens_context(source.tokenizer_dir);
  chat_template::add_chat_template_kwargs(context, source.chat_template_kwargs, "--chat_template_kwargs");
  const std::string text = chat.render(messages, /*add_generation_prompt=*/true, context).text;
  return tokenizer.encode(text, /*add_special_tokens=*/false);
}

std::vector<int32_t> text_prompt_ids(const std::string& prompt, const PromptSource& source,
                                     const tokenizer::Tokenizer& tokenizer) {
  if (!source.raw && has_chat_template(source, tokenizer)) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", prompt}});
    return chat_prompt_ids(messages, source, tokenizer);
  }
  return tokenizer.encode(prompt, /*add_special_tokens=*/true);
}

}  // namespace trlhpc
