#pragma once
// Keyword arguments of a chat template: the variables besides `messages` and `add_generation_prompt`
// that transformers' apply_chat_template(messages, tools=..., **kwargs) hands the template, such as
// Qwen3's `enable_thinking`. TRL's SFTTrainer takes them per row (a `chat_template_kwargs` column of
// objects and a `tools` column) and its GRPO/RLOO configs as `chat_template_kwargs` (a dict, or its
// JSON text); trlhpc takes both: `--chat_template_kwargs '{"enable_thinking": false}'` for every row,
// and a row's own column over it, key by key. The template sees
// {**special_tokens, **flag_kwargs, tools: row's tools, **row_kwargs}: later keys win, as in the Python
// dict literal TRL builds.
#include <string>

#include <nlohmann/json.hpp>

namespace trlhpc::chat_template {

// The JSON object in `text` (an option's value; "" = none, an empty object). Throws UserError naming
// `option` when it is not a JSON object, or names `messages` or `add_generation_prompt` (apply_chat_template
// sets those itself).
nlohmann::ordered_json parse_chat_template_kwargs(const std::string& text, const std::string& option);

// `context` with every key of `kwargs` set over it (kwargs must be an object, or null = nothing);
// `where` names their origin in errors (a row, an option).
void add_chat_template_kwargs(nlohmann::ordered_json& context, const nlohmann::ordered_json& kwargs, const std::string& where);

}  // namespace trlhpc::chat_template
