#pragma once
// The token ids a generation starts from, built as Hugging Face does it:
//  - messages (a JSON list of {"role", "content"}): the chat template rendered with
//    add_generation_prompt = true and encoded without adding special tokens, i.e.
//    tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True);
//  - a plain prompt: when the tokenizer has a chat template (and `raw` is false), the single user
//    message [{"role": "user", "content": prompt}] as above; otherwise tokenizer(prompt)["input_ids"]
//    (the tokenizer's own special tokens, e.g. Llama's BOS).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc {

struct PromptSource {
  std::string tokenizer_dir;
  std::string chat_template_path;  // overrides the tokenizer's template (TRL's --chat_template_path)
  bool raw = false;                // a plain prompt is encoded as text even when there is a template
  // Template variables over the special tokens (--chat_template_kwargs, e.g. {"enable_thinking": false}).
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

// True when `source` has a chat template (a file given, chat_template.jinja, or tokenizer_config.json's).
bool has_chat_template(const PromptSource& source, const tokenizer::Tokenizer& tokenizer);

std::vector<int32_t> chat_prompt_ids(const nlohmann::ordered_json& messages, const PromptSource& source,
                                     const tokenizer::Tokenizer& tokenizer);
std::vector<int32_t> text_prompt_ids(const std::string& prompt, const PromptSource& source,
                                     const tokenizer::Tokenizer& tokenizer);

}  // namespace trlhpc
