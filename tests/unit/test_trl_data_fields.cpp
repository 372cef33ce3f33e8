// TRL's eos_token, pad_token, truncation_mode and dataset_num_proc against TRL 1.16's SFTTrainer
// dataset preparation (tests/fixtures/make_trl_data_fields.py wrote tests/fixtures/trl_data_fields/
// expected.json): the prepared rows (input_ids, trained tokens), the collator's pad id and the first
// collated micro-batch, on the real stories260K and Qwen2 tokenizers of ../shared/data; a token not in
// the vocabulary is refused naming the option and the token; N threads tokenize to the same examples and
// the same cache file as one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "trlhpc/data/dataset/cache.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/dataset/special_tokens.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace trlhpc;
using namespace trlhpc::dataset;
using nlohmann::json;

namespace {

std::string fixture_dir() { return trlhpc::testing::tests_dir() + "/fixtures/trl_data_fields"; }

json expected() {
  std::ifstream in(fixture_dir() + "/expected.json");
  return json::parse(in);
}

bool shared_data_present() { return fs::exists(trlhpc::testing::shared_data_dir() + "/stories260K/tokenizer.json"); }

// The options and tokenizer of one fixture run, as trlhpc sft sets them from the same SFTConfig values.
struct FixtureRun {
  SftDataOptions options;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
};

FixtureRun make_run(const json& run) {
  FixtureRun r;
  const json& s = run["settings"];
  SftDataOptions& o = r.options;
  o.dataset_name = fixture_dir() + "/" + run["dataset"].get<std::string>();
  o.tokenizer_dir = trlhpc::testing::shared_data_dir() + "/" + run["tokenizer"].get<std::string>();
  o.max_length = s["max_length"];
  o.packing = s.value("packing", false);
  o.shuffle = false;
  o.truncation_mode = batching::parse_truncation_mode(s.value("truncation_mode", "keep_start"));
  o.eos_token = s.value("eos_token", "");
  o.pad_token = s.value("pad_token", "");
  if (s.contains("chat_template_path")) o.chat_template_path = fixture_dir() + "/" + s["chat_template_path"].get<std::string>();
  r.tokenizer = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_directory(o.tokenizer_dir));
  apply_special_token_options(*r.tokenizer, o.tokenizer_dir, o.eos_token, o.pad_token);
  return r;
}

std::vector<int32_t> ids_of(const json& a) { return a.get<std::vector<int32_t>>(); }

// TRL's labels (-100 where not trained) as trlhpc's loss mask.
std::vector<uint8_t> mask_of(const json& labels) {
  std::vector<uint8_t> mask;
  for (const json& l : labels) mask.push_back(l.get<int>() != -100);
  return mask;
}

void expect_unpacked_run_matches(const std::string& name) {
  if (!shared_data_present()) GTEST_SKIP() << "no ../shared/data";
  const json run = expected()["runs"][name];
  FixtureRun r = make_run(run);
  const SftDataset ds = SftDataset::build(r.options, r.tokenizer.get());
  const json& rows = run["rows"];
  ASSERT_EQ(ds.examples().size(), rows.size()) << name;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(ds.examples()[i].input_ids, ids_of(rows[i]["input_ids"])) << name << " row " << i;
    EXPECT_EQ(ds.examples()[i].loss_mask, mask_of(rows[i]["labels"])) << name << " row " << i;
  }
  EXPECT_EQ(r.tokenizer->pad_id().value_or(-1), run["pad_token_id"].get<int32_t>()) << name;
  const std::vector<int64_t> first_two = {0, 1};
  const Batch batch = ds.collate(first_two);
  std::vector<int32_t> want;
  for (const json& row : run["collated_input_ids"])
    for (const json& id : row) want.push_back(id);
  EXPECT_EQ(batch.input_ids, want) << name << ": the first micro-batch, right-padded with TRL's pad id";
}

}  // namespace

TEST(TrlDataFields, EosUnkPadS) { expect_unpacked_run_matches("lm_unk_s"); }
TEST(TrlDataFields, EosPlainPieceKeepEnd) { expect_unpacked_run_matches("lm_the_end"); }
TEST(TrlDataFields, PromptCompletionEosKeepEnd) { expect_unpacked_run_matches("pc_unk_end"); }
TEST(TrlDataFields, ChatTemplateSeesReplacedTokensKeepEnd) { expect_unpacked_run_matches("chat_qwen"); }

// TRL 1.16 ignores truncation_mode when packing (its bfd packer keeps the start of every sequence).
TEST(TrlDataFields, PackingKeepsTheStartWhateverTheMode) {
  if (!shared_data_present()) GTEST_SKIP() << "no ../shared/data";
  const json run = expected()["runs"]["lm_packed_end"];
  FixtureRun r = make_run(run);
  const SftDataset ds = SftDataset::build(r.options, r.tokenizer.get());
  const json& rows = run["rows"];
  ASSERT_EQ(ds.num_rows(), static_cast<int64_t>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<int64_t> one = {static_cast<int64_t>(i)};
    EXPECT_EQ(ds.collate(one).input_ids, ids_of(rows[i]["input_ids"])) << "packed row " << i;
  }
  r.options.truncation_mode = batching::TruncationMode::kKeepStart;
  EXPECT_EQ(dataset_cache_key(r.options, true), [&] {
    SftDataOptions o = r.options;
    o.truncation_mode = batching::TruncationMode::kKeepEnd;
    return dataset_cache_key(o, true);
  }()) << "packing: keep_end tokenizes as keep_start, so it shares its cache entry";
}

TEST(TrlDataFields, TokenNotInTheVocabularyIsRefusedByName) {
  if (!shared_data_present()) GTEST_SKIP() << "no ../shared/data";
  const std::string dir = trlhpc::testing::shared_data_dir() + "/stories260K";
  for (const char* option : {"eos_token", "pad_token"}) {
    tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(dir);
    const std::string error = trlhpc::testing::user_error([&] {
      apply_special_token_options(tok, dir, option == std::string("eos_token") ? "<no_such_token>" : "",
                                  option == std::string("pad_token") ? "<no_such_token>" : "");
    });
    EXPECT_NE(error.find(std::string("--") + option + " '<no_such_token>'"), std::string::npos) << error;
    EXPECT_NE(error.find("not in the vocabulary"), std::string::npos) << error;
    // TRL refuses it too (its ValueError names the field and the token).
    const std::string trl = expected()["errors"][option];
    EXPECT_NE(trl.find(std::string("`") + option + "` ('<no_such_token>')"), std::string::npos) << trl;
  }
}

// dataset_num_proc: 3 threads tokenize the 500 conversations to the examples of 1 thread, with the same
// cache key and a byte-identical cache file.
TEST(TrlDataFields, ThreadsTokenizeToTheSameCacheFile) {
  if (!shared_data_present()) GTEST_SKIP() << "no ../shared/data";
  const std::string dir = trlhpc::testing::make_temp_dir("trl_num_proc");
  std::vector<std::string> bytes;
  std::vector<uint64_t> keys;
  for (int64_t threads : {1, 3}) {
    SftDataOptions o;
    o.dataset_name = trlhpc::testing::shared_data_dir() + "/datasets/conversations.jsonl";
    o.tokenizer_dir = trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer";
    o.max_length = 128;
    o.truncation_mode = batching::TruncationMode::kKeepEnd;
    o.num_proc = threads;
    tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(o.tokenizer_dir);
    apply_special_token_options(tok, o.tokenizer_dir, "", "");
    const SftTokenizedExamples tokenized = SftDataset::tokenize(o, &tok);
    EXPECT_EQ(tokenized.stats.examples, 500);
    keys.push_back(dataset_cache_key(o, true));
    const std::string path = dir + "/cache_" + std::to_string(threads) + ".bin";
    ASSERT_TRUE(write_dataset_cache(path, keys.back(), tokenized));
    std::ifstream in(path, std::ios::binary);
    bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fs::remove_all(dir);
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_GT(bytes[0].size(), 1000u);
  EXPECT_TRUE(bytes[0] == bytes[1]) << "the cache file of 3 threads differs from 1 thread's";
}

// The first bad row in file order is reported, whichever thread met it: rows 151 and 251 fail in the chat
// template, row 201 in the reader's form check (met while row 151 still waits for the threads).
TEST(TrlDataFields, ThreadsReportTheFirstBadRow) {
  if (!shared_data_present()) GTEST_SKIP() << "no ../shared/data";
  const std::string dir = trlhpc::testing::make_temp_dir("trl_num_proc_error");
  {
    std::ofstream out(dir + "/rows.jsonl");
    for (int i = 0; i < 300; ++i)
      out << (i == 150 || i == 250 ? R"({"messages": [{"role": "user", "content": "bad"}]})"
              : i == 200           ? R"({"messages": 5})"
                                   : R"({"messages": [{"role": "user", "content": "fine"}]})")
          << "\n";
    std::ofstream(dir + "/t.jinja") << "{% if messages[0]['content'] == 'bad' %}{{ raise_exception('a bad row') }}{% endif %}"
                                       "{{ messages[0]['content'] }}";
  }
  const std::string tokenizer_dir = trlhpc::testing::shared_data_dir() + "/qwen2-tokenizer";
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(tokenizer_dir);
  std::vector<std::string> errors;
  for (int64_t threads : {1, 4}) {
    SftDataOptions o;
    o.dataset_name = dir + "/rows.jsonl";
    o.tokenizer_dir = tokenizer_dir;
    o.chat_template_path = dir + "/t.jinja";
    o.num_proc = threads;
    errors.push_back(trlhpc::testing::user_error([&] { SftDataset::tokenize(o, &tok); }));
  }
  fs::remove_all(dir);
  EXPECT_NE(errors[0].find("rows.jsonl:151"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("a bad row"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0], errors[1]);
}
