// Chat templates: error messages (line/column + construct), the assistant-mask fallback, template
// loading from tokenizer directories, and key order. Rendering itself is compared with transformers in
// test_chat_template.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"

namespace {

using trlhpc::chat_template::ChatTemplate;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// The message of the UserError that parsing (and, when parse succeeds, rendering) throws.
std::string error_of(const std::string& source, const Json& messages = Json::array()) {
  try {
    ChatTemplate::parse(source).render(messages, false);
  } catch (const trlhpc::UserError& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ChatTemplateErrors, UnknownFilterNamesItAndItsPosition) {
  const std::string e = error_of("hello\n  {{ messages | frobnicate }}");
  EXPECT_TRUE(contains(e, "line 2, column 17")) << e;
  EXPECT_TRUE(contains(e, "unknown filter 'frobnicate'")) << e;
  EXPECT_TRUE(contains(e, "tojson")) << e;  // lists what is supported
}

TEST(ChatTemplateErrors, UnknownTest) {
  const std::string e = error_of("{% if x is prime %}{% endif %}");
  EXPECT_TRUE(contains(e, "line 1")) << e;
  EXPECT_TRUE(contains(e, "unknown test 'prime'")) << e;
}

TEST(ChatTemplateErrors, UnterminatedBlockNamesTheOpeningLine) {
  const std::string e = error_of("intro\n\n{% for m in messages %}\n{{ m.content }}\n");
  EXPECT_TRUE(contains(e, "line 3, column 4")) << e;
  EXPECT_TRUE(contains(e, "'{% for %}' block opened here is never closed")) << e;
  EXPECT_TRUE(contains(e, "{% endfor %}")) << e;

  const std::string if_error = error_of("{% if true %}a{% else %}b");
  EXPECT_TRUE(contains(if_error, "line 1, column 4")) << if_error;
  EXPECT_TRUE(contains(if_error, "{% endif %}")) << if_error;
}

TEST(ChatTemplateErrors, UnterminatedTagsCommentsAndStrings) {
  EXPECT_TRUE(contains(error_of("ok\n{{ messages"), "line 2, column 1: unexpected end of template: this '{{' is never closed with '}}'"));
  EXPECT_TRUE(contains(error_of("{% if true"), "never closed with '%}'"));
  EXPECT_TRUE(contains(error_of("a {# note"), "unterminated comment"));
  EXPECT_TRUE(contains(error_of("{{ 'abc }}"), "unterminated string literal"));
  EXPECT_TRUE(contains(error_of("{{ (1 }}"), "expected ')'"));
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  const std::string e = error_of(
      "{% if messages[0]['role'] == 'system' %}\n{{ raise_exception('System role not supported') }}\n{% endif %}",
      Json::parse(R"([{"role": "system", "content": "x"}])"));
  EXPECT_TRUE(contains(e, "line 2")) << e;
  EXPECT_TRUE(contains(e, "raised an exception: System role not supported")) << e;
}

TEST(ChatTemplateErrors, UnsupportedStatementsAndStrayEndTags) {
  std::string e = error_of("{% include 'other.jinja' %}");
  EXPECT_TRUE(contains(e, "line 1, column 4: unsupported statement '{% include %}'")) << e;
  e = error_of("a\n{% call foo() %}x{% endcall %}");
  EXPECT_TRUE(contains(e, "line 2")) << e;
  EXPECT_TRUE(contains(e, "unsupported statement '{% call %}'")) << e;
  e = error_of("{% endfor %}");
  EXPECT_TRUE(contains(e, "no open block")) << e;
  e = error_of("{% break %}");
  EXPECT_TRUE(contains(e, "outside of a for loop")) << e;
  e = error_of("{% for m in messages recursive %}{% endfor %}");
  EXPECT_TRUE(contains(e, "recursive for loops are not supported")) << e;
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheExpression) {
  std::string e = error_of("{{ 'x' }}\n{{ tools_list.first }}");
  EXPECT_TRUE(contains(e, "line 2")) << e;
  EXPECT_TRUE(contains(e, "'tools_list' is undefined")) << e;
  e = error_of("{{ messages[0].content + 1 }}", Json::parse(R"([{"role": "user", "content": "x"}])"));
  EXPECT_TRUE(contains(e, "can only concatenate str (not \"int\") to str")) << e;
  e = error_of("{{ [1].append(2) }}");
  EXPECT_TRUE(contains(e, "sandbox forbids modifying")) << e;
  e = error_of("{% set d = {} %}{% set d.x = 1 %}");
  EXPECT_TRUE(contains(e, "only namespace() objects take attribute assignments")) << e;
}

TEST(ChatTemplate, GenerationSpansAreByteOffsets) {
  const auto t = ChatTemplate::parse(
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>"
      "{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}");
  EXPECT_TRUE(t.has_generation_blocks());
  const auto r = t.render(Json::parse(R"([{"role": "user", "content": "é?"}, {"role": "assistant", "content": "ü!"}])"),
                          false);
  EXPECT_EQ(r.text, "<user>é?<assistant>ü!</s>");  // trim_blocks eats the newline after {% endif %}
  ASSERT_EQ(r.generation_spans.size(), 1u);
  EXPECT_EQ(r.text.substr(r.generation_spans[0].first, r.generation_spans[0].second - r.generation_spans[0].first),
            "ü!</s>");
}

TEST(ChatTemplate, AssistantMaskFallbackLocatesContentInOrder) {
  // No {% generation %}: the assistant contents are found in order; "hi" inside the user turn and the
  // role header are not marked, and neither is the end-of-turn token.
  const auto t = ChatTemplate::parse(
      "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}{{ eos_token }}\n{% endfor %}");
  EXPECT_FALSE(t.has_generation_blocks());
  const Json messages = Json::parse(R"([{"role": "user", "content": "say hi"}, {"role": "assistant", "content": " hi "},
                                         {"role": "user", "content": "again"}, {"role": "assistant", "content": "hi"}])");
  const auto mask = trlhpc::chat_template::assistant_char_mask(t, messages, Json{{"eos_token", "</s>"}});
  EXPECT_FALSE(mask.from_generation_blocks);
  EXPECT_EQ(mask.text, "<|user|>\nsay hi</s>\n<|assistant|>\nhi</s>\n<|user|>\nagain</s>\n<|assistant|>\nhi</s>\n");
  std::string marked;
  for (size_t i = 0; i < mask.text.size(); ++i) marked += mask.mask[i] ? mask.text[i] : '.';
  EXPECT_EQ(marked, std::string(34, '.') + "hi" + std::string(38, '.') + "hi" + std::string(5, '.'));
}

TEST(ChatTemplate, AssistantMaskFallbackRejectsRewrittenContent) {
  const auto t = ChatTemplate::parse("{% for m in messages %}{{ m.content | upper }}{% endfor %}");
  try {
    trlhpc::chat_template::assistant_char_mask(t, Json::parse(R"([{"role": "assistant", "content": "quiet"}])"));
    FAIL() << "expected a UserError";
  } catch (const trlhpc::UserError& e) {
    EXPECT_TRUE(contains(e.what(), "message 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "{% generation %}")) << e.what();
  }
}

TEST(ChatTemplate, OrderedJsonKeepsKeyOrderForTojsonAndItems) {
  const auto t = ChatTemplate::parse("{{ tools | tojson }}|{% for k, v in messages[0] | items %}{{ k }};{% endfor %}");
  const char* messages = R"([{"role": "user", "content": "x", "name": "n"}])";
  const char* extra = R"({"tools": [{"type": "function", "function": {"name": "f", "description": "d"}}]})";
  EXPECT_EQ(t.render(OrderedJson::parse(messages), false, OrderedJson::parse(extra)).text,
            R"([{"type": "function", "function": {"name": "f", "description": "d"}}]|role;content;name;)");
  // nlohmann::json sorts keys, as documented in chat_template.hpp.
  EXPECT_EQ(t.render(Json::parse(messages), false, Json::parse(extra)).text,
            R"([{"function": {"description": "d", "name": "f"}, "type": "function"}]|content;name;role;)");
}

TEST(ChatTemplate, MessagesDropNullKeysAsTransformersDoes) {
  const auto t = ChatTemplate::parse("{{ messages[0].content is defined }}{{ messages[0] | length }}");
  EXPECT_EQ(t.render(Json::parse(R"([{"role": "assistant", "content": null}])"), false).text, "False1");
}

class ChatTemplateLoading : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = trlhpc::testing::make_temp_dir("chat_template"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  std::string dir_;
};

TEST_F(ChatTemplateLoading, FromTokenizerConfigString) {
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}x", "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  EXPECT_EQ(trlhpc::chat_template::load_chat_template(dir_), "{{ bos_token }}x");
  const auto context = trlhpc::chat_template::load_special_tokens_context(dir_);
  EXPECT_EQ(context.dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
}

TEST_F(ChatTemplateLoading, NamedTemplatesPickDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  EXPECT_EQ(trlhpc::chat_template::load_chat_template(dir_), "D");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "R"}]})");
  try {
    trlhpc::chat_template::load_chat_template(dir_);
    FAIL() << "expected a UserError";
  } catch (const trlhpc::UserError& e) {
    EXPECT_TRUE(contains(e.what(), "\"rag\"")) << e.what();
  }
}

TEST_F(ChatTemplateLoading, JinjaFileWinsAndPathOverrides) {
  write("tokenizer_config.json", R"({"chat_template": "from config"})");
  write("chat_template.jinja", "from jinja file");
  EXPECT_EQ(trlhpc::chat_template::load_chat_template(dir_), "from jinja file");
  write("custom.jinja", "{{ 'custom' }}");
  EXPECT_EQ(trlhpc::chat_template::load_chat_template("/nonexistent", dir_ + "/custom.jinja"), "{{ 'custom' }}");
}

TEST_F(ChatTemplateLoading, MissingTemplateSaysWhatToDo) {
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    trlhpc::chat_template::load_chat_template(dir_);
    FAIL() << "expected a UserError";
  } catch (const trlhpc::UserError& e) {
    EXPECT_TRUE(contains(e.what(), "--chat_template_path")) << e.what();
  }
  EXPECT_THROW(trlhpc::chat_template::load_chat_template(dir_, dir_ + "/absent.jinja"), trlhpc::UserError);
}

}  // namespace
