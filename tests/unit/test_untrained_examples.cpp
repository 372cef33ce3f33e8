// Examples with no trained token (every target masked): counted in SftDataStats::untrained_examples,
// and a dataset where no example trains a token is a UserError naming the dataset and the mask that
// removed every target (assistant_only_loss, completion_only_loss, truncation, pre-tokenized masks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace trlhpc;
using namespace trlhpc::dataset;

namespace {

// examples/tiny-chat: ChatML tokenizer whose template wraps assistant content in {% generation %}.
const std::string kTinyChat = std::string(TRLHPC_SOURCE_DIR) + "/examples/tiny-chat";

const char* kUserOnly = R"({"messages": [{"role": "user", "content": "Say in capitals: sun"}]})";
const char* kWithAssistant =
    R"({"messages": [{"role": "user", "content": "Say in capitals: sun"}, {"role": "assistant", "content": "SUN"}]})";

class UntrainedExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trlhpc_untrained_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_directory(kTinyChat));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  SftDataOptions options(const std::string& rows) const {
    SftDataOptions o;
    o.dataset_name = write("train.jsonl", rows);
    o.tokenizer_dir = kTinyChat;
    o.max_length = 128;
    return o;
  }
  // The UserError of tokenizing `o` ("" when it tokenizes).
  std::string error_of(const SftDataOptions& o, bool with_tokenizer = true) const {
    try {
      SftDataset::tokenize(o, with_tokenizer ? tokenizer_.get() : nullptr);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

  fs::path dir_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(UntrainedExamplesTest, RowsWithoutAssistantTurnAreCountedNotFatal) {
  SftDataOptions o = options(std::string(kWithAssistant) + "\n" + kUserOnly + "\n" + kWithAssistant + "\n" + kUserOnly + "\n");
  o.assistant_only_loss = true;
  const SftDataset ds = SftDataset::build(o, tokenizer_.get());
  EXPECT_EQ(ds.stats().examples, 4);
  EXPECT_EQ(ds.stats().untrained_examples, 2);
  EXPECT_GT(ds.stats().target_tokens, 0);
  // Without assistant_only_loss every token past the first is trained.
  o.assistant_only_loss = false;
  EXPECT_EQ(SftDataset::tokenize(o, tokenizer_.get()).stats.untrained_examples, 0);
}

TEST_F(UntrainedExamplesTest, GenerationBlocksThatMarkNothingAreAnError) {
  SftDataOptions o = options(std::string(kWithAssistant) + "\n" + kWithAssistant + "\n");
  o.assistant_only_loss = true;
  // {% generation %} is present but encloses nothing: transformers' assistant mask is all 0.
  o.chat_template_path = write("empty_generation.jinja",
                               "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                               "'<|im_end|>\\n' }}{% generation %}{% endgeneration %}{% endfor %}");
  const std::string e = error_of(o);
  EXPECT_TRUE(has(e, "dataset " + o.dataset_name + ": no token is trained: all 2 examples have every target masked")) << e;
  EXPECT_TRUE(has(e, "--assistant_only_loss: the chat template marks no assistant token")) << e;
  EXPECT_TRUE(has(e, "{% generation %}")) << e;
}

TEST_F(UntrainedExamplesTest, TemplateWithoutGenerationMarkersAndNoAssistantContentIsAnError) {
  const std::string plain = write("plain.jinja",
                                  "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                                  "'<|im_end|>\\n' }}{% endfor %}");
  SftDataOptions o = options(std::string(kUserOnly) + "\n" + kUserOnly + "\n");
  o.assistant_only_loss = true;
  o.chat_template_path = plain;
  const std::string e = error_of(o);
  EXPECT_TRUE(has(e, "no token is trained: all 2 examples")) << e;
  EXPECT_TRUE(has(e, "--assistant_only_loss: no row has assistant content")) << e;
  EXPECT_TRUE(has(e, "no {% generation %} markers")) << e;
  // The same template with assistant turns: trlhpc marks the assistant content, so it trains.
  o = options(std::string(kWithAssistant) + "\n" + kUserOnly + "\n");
  o.assistant_only_loss = true;
  o.chat_template_path = plain;
  const SftTokenizedExamples t = SftDataset::tokenize(o, tokenizer_.get());
  EXPECT_EQ(t.stats.untrained_examples, 1);
}

TEST_F(UntrainedExamplesTest, CompletionsTruncatedAwayAreAnError) {
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "door hill lake moon ";
  const std::string row = R"({"prompt": ")" + prompt + R"(", "completion": "SUN"})";
  SftDataOptions o = options(row + "\n" + row + "\n");
  o.max_length = 8;
  const std::string e = error_of(o);
  EXPECT_TRUE(has(e, "all 2 examples have every target masked; 2 of them lost every trained token to truncation at "
                     "--max_length 8")) << e;
  // Without completion_only_loss the prompt tokens are trained.
  o.completion_only_loss = false;
  const SftTokenizedExamples t = SftDataset::tokenize(o, tokenizer_.get());
  EXPECT_EQ(t.stats.untrained_examples, 0);
  EXPECT_EQ(t.stats.truncated, 2);
}

// TRL's SFTTrainer (not packing) drops the examples truncation left with no label: the long row goes, the
// short one stays. Packing keeps both (the long one counted as untrained), as TRL's packing does not truncate.
TEST_F(UntrainedExamplesTest, ExamplesTruncationLeavesWithoutLabelsAreDroppedAsTrlDoes) {
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "door hill lake moon ";
  const std::string long_row = R"({"prompt": ")" + prompt + R"(", "completion": "SUN"})";
  const std::string short_row = R"({"prompt": "sun", "completion": "SUN"})";
  SftDataOptions o = options(long_row + "\n" + short_row + "\n" + long_row + "\n");
  o.max_length = 8;
  const SftTokenizedExamples t = SftDataset::tokenize(o, tokenizer_.get());
  EXPECT_EQ(t.stats.examples, 1);
  ASSERT_EQ(t.examples.size(), 1u);
  EXPECT_EQ(t.examples[0].input_ids, tokenizer_->encode("sunSUN<|im_end|>"));
  EXPECT_EQ(t.stats.truncated, 2);
  EXPECT_EQ(t.stats.untrained_examples, 0);
  o.packing = true;
  const SftTokenizedExamples packed = SftDataset::tokenize(o, tokenizer_.get());
  EXPECT_EQ(packed.stats.examples, 3);
  EXPECT_EQ(packed.stats.untrained_examples, 2);
}

TEST_F(UntrainedExamplesTest, PretokenizedMasksOfZerosAreAnError) {
  SftDataOptions o = options(R"({"input_ids": [5, 6, 7], "assistant_masks": [1, 0, 0]})"
                             "\n"
                             R"({"input_ids": [5, 6], "assistant_masks": [0, 0]})"
                             "\n");
  const std::string e = error_of(o, /*with_tokenizer=*/false);
  EXPECT_TRUE(has(e, "no token is trained: all 2 examples")) << e;
  EXPECT_TRUE(has(e, "the rows' assistant_masks mark no token past the first of any row")) << e;
  // One trained token past the first is enough; the other row is counted.
  o = options(R"({"input_ids": [5, 6, 7], "assistant_masks": [0, 0, 1]})"
              "\n"
              R"({"input_ids": [5, 6], "assistant_masks": [1, 0]})"
              "\n");
  const SftTokenizedExamples t = SftDataset::tokenize(o, nullptr);
  EXPECT_EQ(t.stats.untrained_examples, 1);
}

TEST_F(UntrainedExamplesTest, SingleTokenDocumentsAreAnError) {
  // "" + EOS is one token: the first token of a document is never a target.
  const SftDataOptions o = options("{\"text\": \"\"}\n{\"text\": \"\"}\n");
  const std::string e = error_of(o);
  EXPECT_TRUE(has(e, "every example is a single token")) << e;
}

}  // namespace
