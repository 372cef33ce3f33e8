// Hostile model-directory and dataset files (issue 18): a tokenizer.json with an absurd vocabulary id,
// an accelerate YAML with non-scalar keys, dataset rows with out-of-range numbers or deep nesting, and
// a chat template that fails on a row end in a UserError naming the file (and the limit), never in a
// crash or a huge allocation. Also: encode_with_offsets maps offsets of invalid UTF-8 back to the input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/reader.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace fs = std::filesystem;
using namespace trlhpc;

namespace {

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trlhpc_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

  // A copy of the bundled tiny tokenizer whose vocabulary also maps "zz" to `id`.
  std::string tokenizer_with_id(int64_t id) const {
    const fs::path src = fs::path(TRLHPC_SOURCE_DIR) / "examples" / "tiny-chat";
    nlohmann::ordered_json tok = nlohmann::ordered_json::parse(std::ifstream(src / "tokenizer.json"));
    tok["model"]["vocab"]["zz"] = id;
    write("tok/tokenizer.json", tok.dump());
    fs::copy_file(src / "tokenizer_config.json", dir_ / "tok" / "tokenizer_config.json");
    return (dir_ / "tok").string();
  }

  fs::path dir_;
};

std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST_F(HostileFiles, VocabularyIdsBeyondTheLimitAreRefusedWithoutAllocating) {
  for (int64_t id : {int64_t{2147483647}, int64_t{2000000000}, int64_t{tokenizer::kMaxTokenId} + 1, int64_t{1} << 40}) {
    const std::string dir = tokenizer_with_id(id);
    const auto start = std::chrono::steady_clock::now();
    const std::string e = user_error_of([&] { tokenizer::Tokenizer::from_directory(dir); });
    EXPECT_TRUE(contains(e, "tokenizer.json")) << e;
    EXPECT_TRUE(contains(e, "kMaxTokenId")) << e;
    EXPECT_TRUE(contains(e, std::to_string(id))) << e;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    fs::remove_all(dir_ / "tok");
  }
}

TEST_F(HostileFiles, AddedTokenIdsBeyondTheLimitAreRefused) {
  const std::string dir = tokenizer_with_id(5);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(std::ifstream(dir + "/tokenizer_config.json"));
  config["added_tokens_decoder"]["99999999999"] = {{"content", "<x>"}, {"special", true}};
  write("tok/tokenizer_config.json", config.dump());
  const std::string e = user_error_of([&] { tokenizer::Tokenizer::from_directory(dir); });
  EXPECT_TRUE(contains(e, "tokenizer_config.json")) << e;
  EXPECT_TRUE(contains(e, "99999999999")) << e;
}

TEST(HostileAccelerateConfig, NonScalarKeysAreUserErrors) {
  for (const char* yaml : {"{[a]: 1}", "distributed_type: DEEPSPEED\ndeepspeed_config: {[a]: 1}",
                           "distributed_type: FSDP\nfsdp_config: {{a: b}: 1}", "parallelism_config: {[a]: 1}"}) {
    const std::string e = user_error_of([&] { parse_accelerate_config(yaml, "user.yaml", false, 1); });
    EXPECT_TRUE(contains(e, "accelerate config user.yaml")) << yaml << ": " << e;
    EXPECT_TRUE(contains(e, "a key must be a plain name")) << yaml << ": " << e;
  }
}

TEST_F(HostileFiles, NumbersOutOfRangeAreBadRows) {
  const fs::path file = write("data.jsonl", "{\"text\": \"fine\"}\n{\"a\": 1e999}\n{\"text\": \"also fine\"}\n");
  {
    dataset::DatasetReader reader({file.string()}, {/*skip_bad_rows=*/true});
    dataset::DatasetRow row;
    int rows = 0;
    while (reader.next(row)) ++rows;
    EXPECT_EQ(rows, 2);
    EXPECT_EQ(reader.rows_skipped(), 1);
  }
  const std::string e = user_error_of([&] {
    dataset::DatasetReader reader({file.string()});
    dataset::DatasetRow row;
    while (reader.next(row)) {
    }
  });
  EXPECT_TRUE(contains(e, file.string() + ":2")) << e;
  EXPECT_TRUE(contains(e, "out of range")) << e;
}

TEST_F(HostileFiles, DeeplyNestedRowsAreBadRows) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string ok = std::string(20, '[') + std::string(20, ']');
  const fs::path file = write("data.jsonl", "{\"a\": " + deep + "}\n{\"a\": " + ok + "}\n");
  dataset::DatasetReader reader({file.string()}, {/*skip_bad_rows=*/true});
  dataset::DatasetRow row;
  ASSERT_TRUE(reader.next(row));
  EXPECT_EQ(row.line, 2);
  EXPECT_EQ(reader.rows_skipped(), 1);
  const std::string e = user_error_of([&] {
    dataset::DatasetReader strict({file.string()});
    strict.next(row);
  });
  EXPECT_TRUE(contains(e, file.string() + ":1")) << e;
  EXPECT_TRUE(contains(e, "kMaxRowNesting")) << e;
}

TEST_F(HostileFiles, TemplateErrorsNameTheRowAndTheTemplateFile) {
  const fs::path src = fs::path(TRLHPC_SOURCE_DIR) / "examples" / "tiny-chat";
  const fs::path data = write("chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  const fs::path jinja = write("bad.jinja", "{{ 'a'.replace('a', 'b', 'x') }}");
  dataset::SftDataOptions o;
  o.dataset_name = data.string();
  o.tokenizer_dir = src.string();
  o.chat_template_path = jinja.string();
  o.max_length = 64;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(src.string());
  const std::string e = user_error_of([&] { dataset::SftDataset::tokenize(o, &tok); });
  EXPECT_TRUE(contains(e, data.string() + ":1")) << e;
  EXPECT_TRUE(contains(e, jinja.string())) << e;
  EXPECT_TRUE(contains(e, "cannot be interpreted as an integer")) << e;
}

TEST_F(HostileFiles, DamagedManifestsAreUserErrors) {
  write("ckpt/state.h5", "");
  const std::string dir = (dir_ / "ckpt").string();
  const std::string valid = R"("format": "trlhpc-checkpoint", "format_version": 1)";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"format": 1, "format_version": 1})", "is not a trlhpc checkpoint manifest"},
      {R"({"format": "trlhpc-checkpoint", "format_version": "1"})", "no valid format_version"},
      {R"({"format": "trlhpc-checkpoint", "format_version": 1e300})", "no valid format_version"},
      {"{" + valid + R"(, "step": -3})", "field \"step\" must be a non-negative integer"},
      {"{" + valid + R"(, "sampler": [1]})", "field \"sampler\" must be an object"},
      {"{" + valid + R"(, "sampler": {"step": "x"}})", "field \"sampler.step\""},
      {"{" + valid + R"(, "datasets": {"params/w": {"checksum": 5}}})", "field \"datasets.params/w\""},
      {"{" + valid + R"(, "identity": [)" + std::string(1000, '[') + std::string(1001, ']') + "}", "kMaxManifestNesting"},
  };
  for (const auto& [text, needle] : cases) {
    write("ckpt/manifest.json", text);
    const std::string e = user_error_of([&] { checkpoint::read_manifest(dir); });
    EXPECT_TRUE(contains(e, dir)) << text.substr(0, 80) << ": " << e;
    EXPECT_TRUE(contains(e, needle)) << text.substr(0, 80) << ": " << e;
  }
  write("ckpt/manifest.json", "{" + valid + R"(, "step": 3, "sampler": {"epoch": 0, "step": 3}, "datasets": {}})");
  EXPECT_EQ(checkpoint::read_manifest(dir).at("step"), 3);
}

TEST(HostileText, OffsetsOfInvalidUtf8PointIntoTheInput) {
  const std::string dir = (fs::path(TRLHPC_SOURCE_DIR) / "examples" / "tiny-chat").string();
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(dir);
  // "ab", then \xff (one ill-formed byte) and \xe2\x82 (a truncated 3-byte sequence: one subsequence),
  // then "cd". The library reads each as U+FFFD: the same ids as the repaired text.
  const std::string input = "ab\xff\xe2\x82" "cd";
  const std::string repaired = "ab\xEF\xBF\xBD\xEF\xBF\xBD" "cd";
  const tokenizer::TokenizedText got = tok.encode_with_offsets(input, false);
  const tokenizer::TokenizedText want = tok.encode_with_offsets(repaired, false);
  ASSERT_EQ(got.ids, want.ids);
  // Repaired byte -> input byte, written out by hand for this input: a range starting in a U+FFFD
  // starts at its ill-formed subsequence; one ending inside it ends after that subsequence.
  const size_t begin_of[] = {0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 7};
  const size_t end_of[] = {0, 1, 2, 3, 3, 3, 5, 5, 5, 6, 7};
  ASSERT_EQ(got.offsets.size(), want.offsets.size());
  for (size_t t = 0; t < got.offsets.size(); ++t) {
    EXPECT_EQ(got.offsets[t].first, begin_of[want.offsets[t].first]) << "token " << t;
    EXPECT_EQ(got.offsets[t].second, end_of[want.offsets[t].second]) << "token " << t;
    EXPECT_LE(got.offsets[t].second, input.size());
  }
}

}  // namespace
