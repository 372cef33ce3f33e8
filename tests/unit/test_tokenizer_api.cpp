// Tokenizer API beyond the fixture comparison: vocabulary lookups, special-token ids, chat template,
// offsets, invalid UTF-8, and the UserErrors for missing, malformed or unsupported tokenizer files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace {

using trlhpc::tokenizer::Tokenizer;

std::string qwen2_dir() { return trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer"; }
std::string fixture_dir(const std::string& name) { return trlhpc::testing::tests_dir() + "/fixtures/tokenizers/" + name; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Expects from_directory(dir) to throw a UserError whose message contains every one of `parts`.
void expect_user_error(const std::string& dir, std::initializer_list<std::string> parts) {
  try {
    (void)Tokenizer::from_directory(dir);
    ADD_FAILURE() << "no error for " << dir;
  } catch (const trlhpc::UserError& e) {
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A minimal tokenizer.json around `model`, with the given normalizer and pre-tokenizer JSON.
std::string tokenizer_json(const std::string& model, const std::string& normalizer = "null",
                           const std::string& pre_tokenizer = "null") {
  return R"({"version": "1.0", "added_tokens": [], "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" +
         pre_tokenizer + R"(, "post_processor": null, "decoder": null, "model": )" + model + "}";
}

const std::string kTinyBpe = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

TEST(TokenizerApi, VocabularyLookups) {
  if (!std::filesystem::exists(qwen2_dir())) GTEST_SKIP() << "qwen2-tokenizer not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(qwen2_dir());
  EXPECT_EQ(tokenizer.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tokenizer.token_to_id("Hello"), 9707);
  EXPECT_EQ(tokenizer.token_to_id("\xC4\xA0"), 220);  // "Ġ": a space in the byte-level alphabet
  EXPECT_EQ(tokenizer.id_to_token(220), "\xC4\xA0");
  EXPECT_EQ(tokenizer.id_to_token(151645), "<|im_end|>");
  EXPECT_EQ(tokenizer.id_to_token(999999), std::nullopt);
  EXPECT_EQ(tokenizer.token_to_id("not a token at all"), std::nullopt);
  EXPECT_TRUE(tokenizer.is_special(151643));
  EXPECT_FALSE(tokenizer.is_special(9707));
  EXPECT_EQ(tokenizer.eos_token(), "<|im_end|>");
  EXPECT_EQ(tokenizer.bos_id(), std::nullopt);
  EXPECT_EQ(tokenizer.chat_template().rfind("{% set system_message", 0), 0u);
  // Unknown ids are skipped by decode, special tokens on request.
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{151644, 9707, 999999, 151645}, true), "Hello");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{151644, 9707, 151645}, false), "<|im_start|>Hello<|im_end|>");
}

TEST(TokenizerApi, ChatTemplateFromConfig) {
  const Tokenizer llama3 = Tokenizer::from_directory(fixture_dir("bytelevel-llama3"));
  EXPECT_EQ(llama3.chat_template().rfind("{{ bos_token }}", 0), 0u);
  const Tokenizer sp = Tokenizer::from_directory(fixture_dir("sp-bytefallback"));
  EXPECT_TRUE(sp.chat_template().empty());
}

TEST(TokenizerApi, InvalidUtf8IsReadAsReplacementCharacters) {
  if (!std::filesystem::exists(qwen2_dir())) GTEST_SKIP() << "qwen2-tokenizer not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(qwen2_dir());
  EXPECT_EQ(tokenizer.encode("a\xFF" "b\xE2\x82", false), tokenizer.encode("a\xEF\xBF\xBD" "b\xEF\xBF\xBD", false));
}

// Offsets of a byte-level tokenizer on NFC text tile the input exactly; special tokens get {0, 0}.
TEST(TokenizerApi, OffsetsTileTheInput) {
  if (!std::filesystem::exists(qwen2_dir())) GTEST_SKIP() << "qwen2-tokenizer not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(qwen2_dir());
  for (const std::string text : {"Hello world, it's 2024!", "日本語 👨‍👩‍👧 text\r\n\tend  ",
                                 "<|im_start|>user\nHi<|im_end|>\n"}) {
    const auto encoded = tokenizer.encode_with_offsets(text, true);
    EXPECT_EQ(encoded.ids, tokenizer.encode(text, true));
    ASSERT_EQ(encoded.offsets.size(), encoded.ids.size());
    std::string rebuilt;
    size_t previous_end = 0;
    for (size_t i = 0; i < encoded.ids.size(); ++i) {
      const auto [begin, end] = encoded.offsets[i];
      ASSERT_LE(begin, end);
      ASSERT_LE(end, text.size());
      // Tokens holding part of one character share that character's bytes; add each byte once.
      if (end > previous_end) rebuilt += text.substr(std::max(begin, previous_end), end - std::max(begin, previous_end));
      previous_end = std::max(previous_end, end);
    }
    EXPECT_EQ(rebuilt, text);
  }
  const auto with_specials = Tokenizer::from_directory(fixture_dir("sp-bytefallback")).encode_with_offsets("Hi there", true);
  ASSERT_FALSE(with_specials.offsets.empty());
  EXPECT_EQ(with_specials.offsets.front(), (std::pair<size_t, size_t>{0, 0}));  // <s>
  EXPECT_EQ(with_specials.offsets[1].first, 0u);  // "▁Hi": the prepended ▁ maps to the first character
  EXPECT_EQ(with_specials.offsets.back().second, 8u);
}

TEST(TokenizerApi, MissingFilesAreUserErrors) {
  expect_user_error("/nonexistent/tokenizer/dir", {"/nonexistent/tokenizer/dir", "not a directory"});
  const std::string dir = trlhpc::testing::make_temp_dir("tokenizer_empty");
  expect_user_error(dir, {dir, "no tokenizer.json", "vocab.json"});
  write_file(dir + "/vocab.json", R"({"a": 0})");
  expect_user_error(dir, {dir, "merges.txt"});
  std::filesystem::remove_all(dir);
}

TEST(TokenizerApi, MalformedJsonIsAUserError) {
  const std::string dir = trlhpc::testing::make_temp_dir("tokenizer_malformed");
  write_file(dir + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  expect_user_error(dir, {dir + "/tokenizer.json", "malformed JSON"});
  write_file(dir + "/tokenizer.json", tokenizer_json(kTinyBpe));
  write_file(dir + "/tokenizer_config.json", "{\"bos_token\": ");
  expect_user_error(dir, {dir + "/tokenizer_config.json", "malformed JSON"});
  write_file(dir + "/tokenizer_config.json", "[1, 2]");
  expect_user_error(dir, {"tokenizer_config.json", "JSON object"});
  std::filesystem::remove_all(dir);
}

TEST(TokenizerApi, UnsupportedModelsAreUserErrors) {
  const std::string dir = trlhpc::testing::make_temp_dir("tokenizer_unsupported");
  const std::string file = dir + "/tokenizer.json";
  write_file(file, tokenizer_json(R"({"type": "WordPiece", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"})"));
  expect_user_error(dir, {file, "\"WordPiece\"", "not supported"});
  write_file(file, tokenizer_json(R"({"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 0})"));
  expect_user_error(dir, {file, "\"Unigram\"", "not supported"});
  write_file(file, tokenizer_json(kTinyBpe, R"({"type": "NFKC"})"));
  expect_user_error(dir, {file, "normalizer type \"NFKC\""});
  write_file(file, tokenizer_json(kTinyBpe, "null", R"({"type": "Whitespace"})"));
  expect_user_error(dir, {file, "pre_tokenizer type \"Whitespace\""});
  write_file(file, tokenizer_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})"));
  expect_user_error(dir, {file, "merge 0 \"a b\""});
  write_file(file, tokenizer_json(kTinyBpe, "null", R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})"));
  expect_user_error(dir, {file, "cannot compile the regex"});
  std::filesystem::remove_all(dir);
}

TEST(TokenizerApi, TinyBpeMergesAndDropsUnknownCharacters) {
  const std::string dir = trlhpc::testing::make_temp_dir("tokenizer_tiny");
  write_file(dir + "/tokenizer.json", tokenizer_json(kTinyBpe));
  const Tokenizer tokenizer = Tokenizer::from_directory(dir);
  EXPECT_EQ(tokenizer.encode("abab", false), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tokenizer.encode("aab", false), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(tokenizer.encode("axb", false), (std::vector<int32_t>{2}));  // no unk_token: x is dropped, a b merge
  EXPECT_EQ(tokenizer.vocab_size(), 3);
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{2, 0}), "ab a");  // no decoder: tokens joined by spaces
  std::filesystem::remove_all(dir);
}

}  // namespace
