// Golden comparison of the chat-template renderer against transformers' apply_chat_template.
//
// Fixtures: tests/fixtures/chat_templates/*.json, written by tests/fixtures/make_chat_template_fixtures.py
// with transformers + jinja2 (versions recorded in each file). Each case holds the messages,
// add_generation_prompt and every other template variable transformers passed (extra_context), and
// what transformers rendered (text, or the error it raised), the {% generation %} spans, and for the
// templates with generation blocks the Qwen2 tokenizer's input_ids/offsets and return_assistant_tokens_mask
// output. Spans and offsets count Python characters; they are converted to UTF-8 byte offsets here.
// qwen3_thinking.json: Qwen3's shipped template read from a Qwen3 tokenizer directory, each conversation with
// enable_thinking unset, true and false: the text and the token ids apply_chat_template gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/generate/prompt.hpp"

namespace {

using trlhpc::chat_template::ChatTemplate;
using Json = nlohmann::ordered_json;

std::string fixtures_dir() { return trlhpc::testing::tests_dir() + "/fixtures/chat_templates"; }

Json read_fixture(const std::string& name) {
  std::ifstream in(fixtures_dir() + "/" + name + ".json");
  EXPECT_TRUE(in.good()) << "missing fixture " << name << ".json (run tests/fixtures/make_chat_template_fixtures.py)";
  return Json::parse(in);
}

// byte_offset[k] = byte position of code point k in the UTF-8 text (k = count gives text.size()).
std::vector<size_t> code_point_byte_offsets(const std::string& text) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) offsets.push_back(i);
  offsets.push_back(text.size());
  return offsets;
}

// "first difference at byte N: want ...|... got ...|..." so a mismatch is readable.
std::string describe_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 100)).dump() +
         "\n  got:  " + Json(got.substr(from, 100)).dump();
}

// transformers' assistant_masks: a token is marked when its [start, end) overlaps a generation span.
std::vector<int> token_mask(const std::vector<std::pair<size_t, size_t>>& spans,
                            const std::vector<std::pair<size_t, size_t>>& token_offsets) {
  std::vector<int> mask(token_offsets.size(), 0);
  size_t span = 0;
  for (size_t t = 0; t < token_offsets.size(); ++t) {
    while (span < spans.size() && token_offsets[t].first >= spans[span].second) ++span;
    if (span == spans.size()) break;
    if (token_offsets[t].second > spans[span].first) mask[t] = 1;
  }
  return mask;
}

std::string load_template(const Json& fixture) {
  if (fixture.contains("tokenizer_dir")) {
    const std::string dir = trlhpc::testing::shared_data_dir() + "/" + fixture["tokenizer_dir"].get<std::string>();
    return trlhpc::chat_template::load_chat_template(dir, "");
  }
  return trlhpc::chat_template::load_chat_template("", fixtures_dir() + "/" + fixture["template_file"].get<std::string>());
}

void check_case(const ChatTemplate& tmpl, const Json& c, const std::string& label) {
  SCOPED_TRACE(label);
  const bool add_generation_prompt = c["add_generation_prompt"].get<bool>();
  if (c.contains("error")) {
    try {
      tmpl.render(c["messages"], add_generation_prompt, c["extra_context"]);
      ADD_FAILURE() << "expected the error: " << c["error"].get<std::string>();
    } catch (const trlhpc::UserError& e) {
      EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
          << "transformers raised: " << c["error"].get<std::string>() << "\ntrlhpc raised: " << e.what();
    }
    return;
  }
  const trlhpc::chat_template::RenderResult got = tmpl.render(c["messages"], add_generation_prompt, c["extra_context"]);
  const std::string want = c["text"].get<std::string>();
  ASSERT_EQ(got.text, want) << describe_difference(want, got.text);

  const std::vector<size_t> bytes = code_point_byte_offsets(want);
  std::vector<std::pair<size_t, size_t>> want_spans;
  for (const auto& s : c["generation_spans"]) want_spans.emplace_back(bytes.at(s[0]), bytes.at(s[1]));
  EXPECT_EQ(got.generation_spans, want_spans);

  if (!c.contains("assistant_masks")) return;
  std::vector<std::pair<size_t, size_t>> token_offsets;
  for (const auto& o : c["offsets"]) token_offsets.emplace_back(bytes.at(o[0]), bytes.at(o[1]));
  EXPECT_EQ(token_mask(got.generation_spans, token_offsets), c["assistant_masks"].get<std::vector<int>>());

  // assistant_char_mask marks exactly the bytes of the generation spans (add_generation_prompt=false).
  if (!add_generation_prompt) {
    const trlhpc::chat_template::AssistantCharMask mask = trlhpc::chat_template::assistant_char_mask(tmpl, c["messages"], c["extra_context"]);
    EXPECT_TRUE(mask.from_generation_blocks);
    ASSERT_EQ(mask.text, want);
    std::vector<uint8_t> expected(want.size(), 0);
    for (const auto& [b, e] : want_spans)
      for (size_t i = b; i < e; ++i) expected[i] = 1;
    EXPECT_EQ(mask.mask, expected);
  }
}

void check_fixture(const std::string& name) {
  const Json fixture = read_fixture(name);
  if (fixture.contains("tokenizer_dir") &&
      !std::filesystem::exists(trlhpc::testing::shared_data_dir() + "/" + fixture["tokenizer_dir"].get<std::string>()))
    GTEST_SKIP() << "shared data folder " << trlhpc::testing::shared_data_dir() << " is not available";
  const bool per_case_template = !fixture.contains("tokenizer_dir") && !fixture.contains("template_file");
  const ChatTemplate shared = per_case_template ? ChatTemplate::parse("") : ChatTemplate::parse(load_template(fixture));
  size_t index = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string label = name + " case " + std::to_string(index++) +
                              (per_case_template ? " template " + c["template"].dump() : std::string());
    if (per_case_template) check_case(ChatTemplate::parse(c["template"].get<std::string>()), c, label);
    else check_case(shared, c, label);
  }
}

TEST(ChatTemplateGolden, Qwen2FromTokenizerConfig) {
  check_fixture("qwen2");
  // The special-token variables match tokenizer.special_tokens_map (the fixture's context, no kwargs).
  const std::string dir = trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer";
  if (!std::filesystem::exists(dir)) return;
  const nlohmann::json want = read_fixture("qwen2")["cases"][0]["extra_context"];
  EXPECT_EQ(nlohmann::json(trlhpc::chat_template::load_special_tokens_context(dir)), want);
}
TEST(ChatTemplateGolden, Llama3WithTools) { check_fixture("llama3"); }
TEST(ChatTemplateGolden, Zephyr) { check_fixture("zephyr"); }
TEST(ChatTemplateGolden, GemmaRaisesOnSystemRole) { check_fixture("gemma"); }
TEST(ChatTemplateGolden, Mistral) { check_fixture("mistral"); }
TEST(ChatTemplateGolden, Phi3) { check_fixture("phi3"); }
TEST(ChatTemplateGolden, Qwen3ToolsAndReasoning) { check_fixture("qwen3"); }
TEST(ChatTemplateGolden, ChatmlGenerationAssistantMasks) { check_fixture("chatml_generation"); }
TEST(ChatTemplateGolden, Qwen2GenerationAssistantMasks) { check_fixture("qwen2_generation"); }
TEST(ChatTemplateGolden, JinjaFeatures) { check_fixture("features"); }

}  // namespace

namespace {

// A Qwen3 tokenizer directory: the Qwen2 BPE files Qwen3 shares, and Qwen3's tokenizer_config.json (its
// added tokens up to </think> = 151668 and its chat template).
std::string qwen3_tokenizer_dir() {
  namespace fs = std::filesystem;
  const std::string dir = trlhpc::testing::make_temp_dir("qwen3_tokenizer");
  for (const char* name : {"vocab.json", "merges.txt"})
    fs::copy_file(trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer/" + name, fs::path(dir) / name);
  fs::copy_file(fixtures_dir() + "/qwen3_tokenizer_config.json", fs::path(dir) / "tokenizer_config.json");
  return dir;
}

// The template variables besides messages as trlhpc passes them: the special tokens, the kwargs over them,
// and the row's tools; transformers' recorded extra_context must be exactly these.
Json template_context(const std::string& tokenizer_dir, const Json& c) {
  Json context = trlhpc::chat_template::load_special_tokens_context(tokenizer_dir);
  trlhpc::chat_template::add_chat_template_kwargs(context, c["chat_template_kwargs"], "case");
  if (!c["tools"].is_null()) context["tools"] = c["tools"];
  return context;
}

}  // namespace

TEST(ChatTemplateGolden, Qwen3ShippedTemplateWithEnableThinking) {
  if (!std::filesystem::exists(trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer"))
    GTEST_SKIP() << "shared data folder " << trlhpc::testing::shared_data_dir() << " is not available";
  const Json fixture = read_fixture("qwen3_thinking");
  const std::string dir = qwen3_tokenizer_dir();
  const std::string source = trlhpc::chat_template::load_chat_template(dir);
  EXPECT_EQ(source, trlhpc::chat_template::load_chat_template("", fixtures_dir() + "/qwen3.jinja"));
  const ChatTemplate tmpl = ChatTemplate::parse(source);
  const auto tokenizer = trlhpc::tokenizer::Tokenizer::from_directory(dir);
  size_t index = 0, prompts = 0, thinking_off = 0;
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE("qwen3_thinking case " + std::to_string(index++) + " kwargs " + c["chat_template_kwargs"].dump());
    const Json context = template_context(dir, c);
    EXPECT_EQ(nlohmann::json(context), nlohmann::json(c["extra_context"]));
    const bool add_generation_prompt = c["add_generation_prompt"].get<bool>();
    const std::string want = c["text"].get<std::string>();
    const std::string got = tmpl.render(c["messages"], add_generation_prompt, context).text;
    ASSERT_EQ(got, want) << describe_difference(want, got);
    const std::vector<int32_t> ids = c["input_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer.encode(got, false), ids);
    if (add_generation_prompt && c["tools"].is_null()) {  // `trlhpc generate --messages ... --chat_template_kwargs`
      const trlhpc::PromptSource prompt_source{dir, "", false, c["chat_template_kwargs"]};
      EXPECT_EQ(trlhpc::chat_prompt_ids(c["messages"], prompt_source, tokenizer), ids);
      ++prompts;
      thinking_off += c["chat_template_kwargs"].value("enable_thinking", true) ? 0 : 1;
    }
  }
  EXPECT_EQ(index, 96u);
  EXPECT_GT(thinking_off, 5u) << "the fixture must hold generation prompts with enable_thinking false";
  EXPECT_GT(prompts, 3 * thinking_off - 1);
  std::filesystem::remove_all(dir);
}
