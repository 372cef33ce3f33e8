// Chat template keyword arguments: parsing an option's JSON and layering kwargs over the special tokens
// (see template_kwargs.hpp for the order transformers and TRL use).
#include "trlhpc/data/chat_template/template_kwargs.hpp"

#include "trlhpc/core/error.hpp"

namespace trlhpc::chat_template {

void add_chat_template_kwargs(nlohmann::ordered_json& context, const nlohmann::ordered_json& kwargs, const std::string& where) {
  if (kwargs.is_null()) return;
  if (!kwargs.is_object())
    throw UserError(where + ": chat_template_kwargs must be a JSON object of template variables, e.g. "
                    "{\"enable_thinking\": false}, not a JSON " + std::string(kwargs.type_name()));
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    // apply_chat_template passes these itself: a second value is Python's "got multiple values" error.
    if (it.key() == "messages" || it.key() == "add_generation_prompt")
      throw UserError(where + ": chat_template_kwargs cannot set \"" + it.key() +
                      "\" (apply_chat_template sets it from the row and the dataset form); remove the key");
    context[it.key()] = it.value();
  }
}

nlohmann::ordered_json parse_chat_template_kwargs(const std::string& text, const std::string& option) {
  if (text.empty()) return nlohmann::ordered_json::object();
  nlohmann::ordered_json kwargs;
  try {
    kwargs = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(option + " '" + text + "': not valid JSON (" + e.what() +
                    "); give a JSON object such as '{\"enable_thinking\": false}'");
  }
  nlohmann::ordered_json checked = nlohmann::ordered_json::object();
  add_chat_template_kwargs(checked, kwargs, option);
  return kwargs;
}

}  // namespace trlhpc::chat_template
