// Dataset conversations (the "messages" of a row) rendered by the real chat templates of
// tests/fixtures/chat_templates: the messages are untrusted, the templates are the ones models ship.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"

namespace {
std::vector<trlhpc::chat_template::ChatTemplate> load_templates() {
  std::vector<trlhpc::chat_template::ChatTemplate> out;
  for (const auto& entry : std::filesystem::directory_iterator(TRLHPC_SOURCE_DIR "/tests/fixtures/chat_templates")) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    out.push_back(trlhpc::chat_template::ChatTemplate::parse(text.str()));
  }
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<trlhpc::chat_template::ChatTemplate> templates = load_templates();
  const auto messages = nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) return 0;
  static const nlohmann::ordered_json context = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  for (const auto& t : templates) {
    trlhpc::fuzz::expect_user_errors_only([&] { (void)t.render(messages, size % 2 == 0, context); });
    trlhpc::fuzz::expect_user_errors_only([&] { (void)trlhpc::chat_template::assistant_char_mask(t, messages, context); });
  }
  return 0;
}
