// Chat-template text (tokenizer_config.json's chat_template / chat_template.jinja) rendered over a
// fixed conversation, with and without the generation prompt, and through the assistant-mask path.
#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi, what is 2+2?"},
    {"role": "assistant", "content": "4", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": [{"type": "text", "text": "4"}]}])");
  static const nlohmann::ordered_json context = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  trlhpc::fuzz::expect_user_errors_only([&] {
    const auto t = trlhpc::chat_template::ChatTemplate::parse(trlhpc::fuzz::as_text(data, size));
    (void)t.render(messages, true, context);
    (void)trlhpc::chat_template::assistant_char_mask(t, messages, context);
  });
  return 0;
}
