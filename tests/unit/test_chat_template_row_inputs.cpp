// What a conversational row hands its chat template besides the messages, as TRL's SFTTrainer passes it
// (tokenize_fn: apply_chat_template(messages, tools=row["tools"], **row["chat_template_kwargs"])): the
// special tokens, then --chat_template_kwargs, the row's tools (a list or its JSON text), the row's
// chat_template_kwargs over all of them; rows whose columns have the wrong type are malformed.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc {
namespace {

using dataset::SftDataOptions;
using dataset::SftDataset;

const std::string kTinyChat = std::string(TRLHPC_SOURCE_DIR) + "/examples/tiny-chat";
// Prints the variables under test, then the messages' content (the ends of its lines are plain text).
const char* kTemplate =
    "{{ mode }},{{ eos_token }},{{ tools | tojson if tools else 'no tools' }}:"
    "{% for m in messages %}{{ m.content }};{% endfor %}";

class ChatTemplateRowInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("row_inputs");
    std::ofstream(dir_ + "/template.jinja") << kTemplate;
    tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_directory(kTinyChat));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SftDataOptions options(const std::string& rows) const {
    std::ofstream(dir_ + "/train.jsonl") << rows;
    SftDataOptions o;
    o.dataset_name = dir_ + "/train.jsonl";
    o.tokenizer_dir = kTinyChat;
    o.chat_template_path = dir_ + "/template.jinja";
    o.shuffle = false;
    return o;
  }
  std::vector<std::string> rendered(const SftDataOptions& o) const {
    std::vector<std::string> texts;
    for (const auto& ex : SftDataset::tokenize(o, tokenizer_.get()).examples) texts.push_back(tokenizer_->decode(ex.input_ids, false));
    return texts;
  }

  std::string dir_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(ChatTemplateRowInputs, FlagThenToolsThenRowKwargs) {
  const std::string rows =
      R"({"messages": [{"role": "user", "content": "a"}]})" "\n"
      R"({"messages": [{"role": "user", "content": "b"}], "chat_template_kwargs": {"mode": "row", "eos_token": "E"}})" "\n"
      R"({"messages": [{"role": "user", "content": "c"}], "tools": [{"name": "f"}], "chat_template_kwargs": null})" "\n"
      R"({"messages": [{"role": "user", "content": "d"}], "tools": "[{\"name\": \"g\"}]"})" "\n";
  SftDataOptions o = options(rows);
  o.chat_template_kwargs = nlohmann::ordered_json::parse(R"({"mode": "flag"})");
  EXPECT_EQ(rendered(o), (std::vector<std::string>{"flag,<|im_end|>,no tools:a;", "row,E,no tools:b;",
                                                   R"(flag,<|im_end|>,[{"name": "f"}]:c;)", R"(flag,<|im_end|>,[{"name": "g"}]:d;)"}));
  o.chat_template_kwargs = nlohmann::ordered_json::object();  // no flag: `mode` undefined prints nothing
  EXPECT_EQ(rendered(o)[0], ",<|im_end|>,no tools:a;");
}

TEST_F(ChatTemplateRowInputs, WrongTypesAreMalformedRows) {
  const std::string good = R"({"messages": [{"role": "user", "content": "a"}]})";
  for (const std::string bad : {R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": "x"})",
                                R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": [1]})",
                                R"({"messages": [{"role": "user", "content": "a"}], "tools": "not json"})",
                                R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"messages": []}})"}) {
    SftDataOptions o = options(good + "\n" + bad + "\n");
    const std::string e = testing::user_error([&] { SftDataset::tokenize(o, tokenizer_.get()); });
    EXPECT_NE(e.find("train.jsonl:2"), std::string::npos) << e;
    EXPECT_TRUE(e.find("chat_template_kwargs") != std::string::npos || e.find("tools") != std::string::npos) << e;
    if (bad.find("{\"messages\": []}") != std::string::npos) continue;  // well-typed: refused when rendered
    o.skip_bad_rows = true;
    const auto t = SftDataset::tokenize(o, tokenizer_.get());
    EXPECT_EQ(t.stats.rows_skipped, 1) << bad;
    EXPECT_EQ(t.stats.examples, 1) << bad;
  }
}

}  // namespace
}  // namespace trlhpc
