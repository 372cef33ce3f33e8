// Tokenizer vs the Hugging Face `tokenizers` library: ids (with and without special tokens) and
// decoded text of every string in tests/fixtures/tokenizer_expected.jsonl, written by
// tests/fixtures/make_tokenizer_fixtures.py, for six tokenizers (Qwen2 from vocab.json + merges.txt,
// stories260K's Llama-2 style tokenizer.json, and four trained fixtures covering byte-level and
// SentencePiece-style BPE). Matches must be exact.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace {

using trlhpc::tokenizer::Tokenizer;
using nlohmann::json;

struct Expected {
  json tokenizer;          // the "tokenizer" line
  std::vector<json> cases;  // its "case" lines
};

const std::map<std::string, Expected>& expected() {
  static const std::map<std::string, Expected> all = [] {
    std::map<std::string, Expected> out;
    std::ifstream in(trlhpc::testing::tests_dir() + "/fixtures/tokenizer_expected.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      json j = json::parse(line);
      if (j["kind"] == "tokenizer") out[j["name"].get<std::string>()].tokenizer = j;
      else out[j["tokenizer"].get<std::string>()].cases.push_back(j);
    }
    return out;
  }();
  return all;
}

// "shared:qwen2-tokenizer" -> shared data dir; "tests:fixtures/..." -> tests dir.
std::string resolve(const std::string& path) {
  const size_t colon = path.find(':');
  const std::string root = path.substr(0, colon) == "shared" ? trlhpc::testing::shared_data_dir()
                                                             : trlhpc::testing::tests_dir();
  return root + "/" + path.substr(colon + 1);
}

std::string ids_string(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  return "[" + os.str() + "]";
}

std::optional<int32_t> optional_id(const json& value) {
  return value.is_null() ? std::nullopt : std::optional<int32_t>(value.get<int32_t>());
}

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, MatchesTheLibraryExactly) {
  const auto it = expected().find(GetParam());
  ASSERT_NE(it, expected().end()) << "no expected ids for " << GetParam() << "; run make_tokenizer_fixtures.py";
  const Expected& want = it->second;
  const std::string dir = resolve(want.tokenizer["path"].get<std::string>());
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(dir);

  EXPECT_EQ(tokenizer.vocab_size(), want.tokenizer["vocab_size"].get<int32_t>());
  EXPECT_EQ(tokenizer.bos_id(), optional_id(want.tokenizer["bos_id"]));
  EXPECT_EQ(tokenizer.eos_id(), optional_id(want.tokenizer["eos_id"]));
  EXPECT_EQ(tokenizer.pad_id(), optional_id(want.tokenizer["pad_id"]));
  EXPECT_EQ(tokenizer.unk_id(), optional_id(want.tokenizer["unk_id"]));

  size_t ids_match = 0, special_match = 0, decoded_match = 0, skip_match = 0, failures_shown = 0;
  for (const json& c : want.cases) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = tokenizer.encode(text, false);
    const auto ids_special = tokenizer.encode(text, true);
    const auto want_ids = c["ids"].get<std::vector<int32_t>>();
    const auto want_special = c["ids_special"].get<std::vector<int32_t>>();
    const std::string decoded = tokenizer.decode(want_special, false);
    const std::string decoded_skip = tokenizer.decode(want_special, true);
    ids_match += ids == want_ids;
    special_match += ids_special == want_special;
    decoded_match += decoded == c["decoded"].get<std::string>();
    skip_match += decoded_skip == c["decoded_skip"].get<std::string>();
    const bool ok = ids == want_ids && ids_special == want_special && decoded == c["decoded"] &&
                    decoded_skip == c["decoded_skip"];
    if (!ok && failures_shown++ < 5) {
      ADD_FAILURE() << GetParam() << " text " << json(text).dump() << "\n  ids      " << ids_string(ids)
                    << "\n  expected " << ids_string(want_ids) << "\n  special  " << ids_string(ids_special)
                    << "\n  expected " << ids_string(want_special) << "\n  decoded  " << json(decoded).dump()
                    << "\n  expected " << c["decoded"].dump() << "\n  skip     " << json(decoded_skip).dump()
                    << "\n  expected " << c["decoded_skip"].dump();
    }
  }
  const size_t n = want.cases.size();
  std::printf("[ %-16s ] ids %zu/%zu, with special tokens %zu/%zu, decode %zu/%zu, decode skipping specials %zu/%zu\n",
              GetParam().c_str(), ids_match, n, special_match, n, decoded_match, n, skip_match, n);
  EXPECT_EQ(ids_match, n);
  EXPECT_EQ(special_match, n);
  EXPECT_EQ(decoded_match, n);
  EXPECT_EQ(skip_match, n);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerFixture,
                         ::testing::Values("qwen2", "stories260K", "bytelevel-gpt2", "bytelevel-llama3",
                                           "sp-bytefallback", "sp-metaspace-unk"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The c4 sample through Qwen2: decode(encode(x)) == x (byte-level BPE is lossless on NFC text).
TEST(Tokenizer, Qwen2RoundTripsC4Text) {
  const std::string dir = trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer";
  const std::string data = trlhpc::testing::shared_data_dir() + "/datasets/c4_text.jsonl";
  if (!std::filesystem::exists(dir) || !std::filesystem::exists(data)) GTEST_SKIP() << "shared data not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(dir);
  std::ifstream in(data);
  std::string line;
  size_t rows = 0;
  while (std::getline(in, line)) {
    const std::string text = json::parse(line)["text"].get<std::string>();
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text) << "row " << rows;
    ++rows;
  }
  EXPECT_GT(rows, 0u);
}

// encode_batch (OpenMP, shared word cache) gives what encode gives.
TEST(Tokenizer, BatchEncodingMatchesSequential) {
  const std::string dir = trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is not present";
  const Tokenizer tokenizer = Tokenizer::from_directory(dir);
  std::vector<std::string> texts;
  for (const json& c : expected().at("qwen2").cases) texts.push_back(c["text"].get<std::string>());
  for (int copy = 0; copy < 3; ++copy) texts.insert(texts.end(), texts.begin(), texts.begin() + 60);
  const auto batch = tokenizer.encode_batch(texts, true);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], tokenizer.encode(texts[i], true)) << i;
}

}  // namespace
