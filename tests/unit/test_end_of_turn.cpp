// --assistant_only_loss with a chat template without {% generation %} markers: the located assistant
// content is trained together with the end-of-turn token that closes the turn (end_of_turn.hpp), so the
// model learns to stop. Reference: the same template WITH markers around content + end-of-turn token,
// masked by the {% generation %} rule (what transformers' return_assistant_tokens_mask and TRL's
// training templates do); both render the same text, so their token masks must be equal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "trlhpc/data/dataset/end_of_turn.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace trlhpc;
using namespace trlhpc::dataset;

namespace {

const std::string kTinyChat = std::string(TRLHPC_SOURCE_DIR) + "/examples/tiny-chat";  // ChatML tokenizer

const char* kRows =
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say in capitals: sun"}, {"role": "assistant", "content": "SUN"}, {"role": "user", "content": "and moon"}, {"role": "assistant", "content": "MOON"}]})"
    "\n"
    R"({"messages": [{"role": "user", "content": "Reverse: abc"}, {"role": "assistant", "content": "cba"}]})"
    "\n";

class EndOfTurnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trlhpc_eot_" + std::to_string(::getpid()) + "_" +
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
  SftTokenizedExamples tokenize(const std::string& chat_template) const {
    SftDataOptions o;
    o.dataset_name = write("train.jsonl", kRows);
    o.tokenizer_dir = kTinyChat;
    o.chat_template_path = write("template.jinja", chat_template);
    o.max_length = 256;
    o.assistant_only_loss = true;
    return SftDataset::tokenize(o, tokenizer_.get());
  }
  void expect_same_masks(const SftTokenizedExamples& got, const SftTokenizedExamples& want) const {
    ASSERT_EQ(got.examples.size(), want.examples.size());
    for (size_t e = 0; e < got.examples.size(); ++e) {
      EXPECT_EQ(got.examples[e].input_ids, want.examples[e].input_ids) << "example " << e;
      EXPECT_EQ(got.examples[e].loss_mask, want.examples[e].loss_mask) << "example " << e;
    }
  }

  fs::path dir_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

// ChatML as Qwen2.5 renders it: <|im_end|> then a newline, then the next <|im_start|>.
TEST_F(EndOfTurnTest, ChatMlTrainsContentAndImEndLikeGenerationMarkers) {
  const std::string plain =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}{% endfor %}";
  const std::string marked =
      "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}{% generation %}"
      "{{ m['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}{% else %}"
      "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}{% endif %}{% endfor %}";
  const SftTokenizedExamples got = tokenize(plain);
  expect_same_masks(got, tokenize(marked));
  EXPECT_EQ(got.stats.end_of_turn.marked, 3);  // SUN, MOON, cba
  EXPECT_EQ(got.stats.end_of_turn.missing, 0);
  EXPECT_EQ(tokenize(marked).stats.end_of_turn.marked, 0);  // markers: the template decides, nothing added
}

// Llama 3 style: the next turn's header token follows the end-of-turn token directly; it stays untrained.
TEST_F(EndOfTurnTest, OnlyTheFirstSpecialTokenAfterTheContentIsTrained) {
  const std::string plain = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n\\n' + m['content'] + '<|im_end|>' }}{% endfor %}";
  const std::string marked =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n\\n' }}{% if m['role'] == 'assistant' %}"
      "{% generation %}{{ m['content'] + '<|im_end|>' }}{% endgeneration %}{% else %}{{ m['content'] + '<|im_end|>' }}"
      "{% endif %}{% endfor %}";
  expect_same_masks(tokenize(plain), tokenize(marked));
}

// Whitespace between the content and the end-of-turn token is trained with it (the model must emit it).
TEST_F(EndOfTurnTest, WhitespaceBeforeTheEndOfTurnTokenIsTrainedToo) {
  const std::string plain = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n<|im_end|>\\n' }}{% endfor %}";
  const std::string marked =
      "{% for m in messages %}{{ m['role'] + ': ' }}{% if m['role'] == 'assistant' %}{% generation %}"
      "{{ m['content'] + '\\n<|im_end|>' }}{% endgeneration %}{{ '\\n' }}{% else %}"
      "{{ m['content'] + '\\n<|im_end|>\\n' }}{% endif %}{% endfor %}";
  expect_same_masks(tokenize(plain), tokenize(marked));
}

TEST_F(EndOfTurnTest, TurnsWithoutAnEndOfTurnTokenAreCounted) {
  const std::string plain = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] + ' END\\n' }}{% endfor %}";
  const SftTokenizedExamples got = tokenize(plain);
  EXPECT_EQ(got.stats.end_of_turn.marked, 0);
  EXPECT_EQ(got.stats.end_of_turn.missing, 3);
}

TEST(EndOfTurn, MarkEndOfTurnOnTokenIds) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(kTinyChat);
  const std::vector<int32_t> ids = tok.encode("<|im_start|>assistant\nhi<|im_end|>\n<|im_start|>", false);
  const int32_t im_end = tok.encode("<|im_end|>", false).at(0);
  size_t end = 0;
  while (end < ids.size() && ids[end] != im_end) ++end;
  ASSERT_GT(end, 1u);
  ASSERT_LT(end + 1, ids.size());
  std::vector<uint8_t> mask(ids.size(), 0);
  const size_t hi = end - 1;  // the last content token
  mask[hi] = 1;
  const EndOfTurnCount count = mark_end_of_turn(ids, mask, tok);
  EXPECT_EQ(count.marked, 1);
  ASSERT_LT(hi + 1, ids.size());
  EXPECT_TRUE(tok.is_special(ids[hi + 1]));
  EXPECT_EQ(mask[hi + 1], 1);                  // <|im_end|>
  for (size_t t = hi + 2; t < ids.size(); ++t) EXPECT_EQ(mask[t], 0) << t;  // "\n", <|im_start|>
  for (size_t t = 0; t < hi; ++t) EXPECT_EQ(mask[t], 0) << t;
}

}  // namespace
