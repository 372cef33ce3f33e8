// The tokenized-dataset cache: round trip, key sensitivity, corrupt files as misses, and that
// from_examples(tokenize(...)) is build(...).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/data/dataset/cache.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace trlhpc;
using namespace trlhpc::dataset;

namespace {

class DatasetCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trlhpc_dataset_cache_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tok");
    const fs::path src = fs::path(TRLHPC_SOURCE_DIR) / "examples" / "tiny-chat";
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(src / f, dir_ / "tok" / f);
    fs::copy_file(src / "train.jsonl", dir_ / "train.jsonl");
  }
  void TearDown() override { fs::remove_all(dir_); }

  SftDataOptions options() const {
    SftDataOptions o;
    o.dataset_name = (dir_ / "train.jsonl").string();
    o.tokenizer_dir = (dir_ / "tok").string();
    o.max_length = 128;
    o.packing = true;
    o.assistant_only_loss = true;
    return o;
  }
  static void append(const fs::path& p, const std::string& text) {
    std::ofstream(p, std::ios::app) << text;
  }

  fs::path dir_;
};

DatasetCacheEntry sample_entry() {
  DatasetCacheEntry e;
  e.examples.push_back({{1, 2, 3}, {0, 1, 1}});
  e.examples.push_back({{7}, {1}});
  e.examples.push_back({{-5, 100000, 42, 9}, {1, 0, 0, 1}});
  e.stats.rows_read = 4;
  e.stats.rows_skipped = 1;
  e.stats.examples = 3;
  e.stats.truncated = 2;
  e.stats.tokens = 8;
  e.stats.target_tokens = 5;
  e.stats.untrained_examples = 1;  // {7}: a single token is never a target
  e.stats.form = "conversational";
  return e;
}

void expect_same(const DatasetCacheEntry& a, const DatasetCacheEntry& b) {
  ASSERT_EQ(a.examples.size(), b.examples.size());
  for (size_t i = 0; i < a.examples.size(); ++i) {
    EXPECT_EQ(a.examples[i].input_ids, b.examples[i].input_ids) << i;
    EXPECT_EQ(a.examples[i].loss_mask, b.examples[i].loss_mask) << i;
  }
  EXPECT_EQ(a.stats.rows_read, b.stats.rows_read);
  EXPECT_EQ(a.stats.rows_skipped, b.stats.rows_skipped);
  EXPECT_EQ(a.stats.examples, b.stats.examples);
  EXPECT_EQ(a.stats.truncated, b.stats.truncated);
  EXPECT_EQ(a.stats.tokens, b.stats.tokens);
  EXPECT_EQ(a.stats.target_tokens, b.stats.target_tokens);
  EXPECT_EQ(a.stats.untrained_examples, b.stats.untrained_examples);
  EXPECT_EQ(a.stats.form, b.stats.form);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

}  // namespace

TEST_F(DatasetCacheTest, RoundTrip) {
  const DatasetCacheEntry entry = sample_entry();
  const std::string path = dataset_cache_path((dir_ / "cache" / "nested").string(), 0x1234abcdULL);
  EXPECT_EQ(fs::path(path).filename().string(), "000000001234abcd.tokens");
  std::string error;
  ASSERT_TRUE(write_dataset_cache(path, 0x1234abcdULL, entry, &error)) << error;
  std::string warning;
  const auto back = read_dataset_cache(path, 0x1234abcdULL, &warning);
  ASSERT_TRUE(back.has_value()) << warning;
  EXPECT_TRUE(warning.empty());
  expect_same(entry, *back);
  // No temp file left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(DatasetCacheTest, RealDatasetRoundTripAndFromExamplesEqualsBuild) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory((dir_ / "tok").string());
  const SftDataOptions o = options();
  SftTokenizedExamples t = SftDataset::tokenize(o, &tok);
  const uint64_t key = dataset_cache_key(o, true);
  const std::string path = dataset_cache_path((dir_ / "cache").string(), key);
  ASSERT_TRUE(write_dataset_cache(path, key, t));
  auto back = read_dataset_cache(path, key);
  ASSERT_TRUE(back.has_value());
  expect_same(t, *back);
  const SftDataset built = SftDataset::build(o, &tok);
  const SftDataset cached = SftDataset::from_examples(o, std::move(*back), &tok);
  ASSERT_EQ(built.num_rows(), cached.num_rows());
  EXPECT_EQ(built.stats().packed_rows, cached.stats().packed_rows);
  EXPECT_EQ(built.stats().tokens, cached.stats().tokens);
  for (int64_t r = 0; r < built.num_rows(); ++r) {
    const int64_t idx[1] = {r};
    const Batch a = built.collate(idx), b = cached.collate(idx);
    EXPECT_EQ(a.input_ids, b.input_ids) << r;
    EXPECT_EQ(a.targets, b.targets) << r;
  }
}

TEST_F(DatasetCacheTest, KeyIsStable) {
  EXPECT_EQ(dataset_cache_key(options(), true), dataset_cache_key(options(), true));
}

TEST_F(DatasetCacheTest, KeyFollowsFileContentNotMtimeOrPlace) {
  const uint64_t base = dataset_cache_key(options(), true);
  const fs::path data = dir_ / "train.jsonl";
  const auto mtime = fs::last_write_time(data);
  fs::last_write_time(data, mtime + std::chrono::seconds(5));  // touched (a copy gets a new mtime)
  EXPECT_EQ(base, dataset_cache_key(options(), true));
  // The same bytes in another folder (another file system, a new Hub cache snapshot): the same key.
  const fs::path copy = dir_ / "copied" / "train.jsonl";
  fs::create_directories(copy.parent_path());
  fs::copy_file(data, copy);
  SftDataOptions moved = options();
  moved.dataset_name = copy.string();
  EXPECT_EQ(base, dataset_cache_key(moved, true));
  // One byte changed, size and mtime kept: a different key.
  std::string bytes;
  {
    std::ifstream in(data, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = bytes.find("a");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'b';
  std::ofstream(data, std::ios::binary | std::ios::trunc) << bytes;
  fs::last_write_time(data, mtime);
  EXPECT_NE(base, dataset_cache_key(options(), true));
  append(data, "\n");
  EXPECT_NE(base, dataset_cache_key(options(), true));
}

TEST_F(DatasetCacheTest, KeyChangesWithTokenizerAndTemplate) {
  const uint64_t base = dataset_cache_key(options(), true);
  EXPECT_NE(base, dataset_cache_key(options(), false));
  append(dir_ / "tok" / "tokenizer.json", " ");
  const uint64_t tokenizer_changed = dataset_cache_key(options(), true);
  EXPECT_NE(base, tokenizer_changed);
  // A chat template file overriding the tokenizer's.
  std::ofstream(dir_ / "t.jinja") << "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  SftDataOptions o = options();
  o.chat_template_path = (dir_ / "t.jinja").string();
  const uint64_t with_template = dataset_cache_key(o, true);
  EXPECT_NE(tokenizer_changed, with_template);
  append(dir_ / "t.jinja", "!");
  EXPECT_NE(with_template, dataset_cache_key(o, true));
}

TEST_F(DatasetCacheTest, KeyChangesWithTokenizationOptionsOnly) {
  const SftDataOptions o = options();
  const uint64_t base = dataset_cache_key(o, true);
  auto key_with = [&](auto change) {
    SftDataOptions x = o;
    change(x);
    return dataset_cache_key(x, true);
  };
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.max_length = 64; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.text_field = "body"; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.assistant_only_loss = false; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.skip_bad_rows = true; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.completion_only_loss = false; }));
  EXPECT_NE(key_with([](SftDataOptions& x) { x.completion_only_loss = true; }),
            key_with([](SftDataOptions& x) { x.completion_only_loss = false; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.packing_strategy = "wrapped"; }));
  EXPECT_NE(base, key_with([](SftDataOptions& x) { x.split = "validation"; x.dataset_name = x.dataset_name; }));
  // Options that only change packing / collation: same examples, same key.
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.seed = 7; }));
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.shuffle = false; }));
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.padding_free = true; }));
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.pad_to_multiple_of = 8; }));
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.packing = false; }));               // truncates either way
  EXPECT_EQ(base, key_with([](SftDataOptions& x) { x.packing_strategy = "bfd_split"; }));  // still truncates
}

TEST_F(DatasetCacheTest, CorruptFilesAreMisses) {
  const DatasetCacheEntry entry = sample_entry();
  const uint64_t key = 99;
  const fs::path path = dataset_cache_path((dir_ / "cache").string(), key);
  std::string warning = "x";
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());  // no file
  EXPECT_TRUE(warning.empty());
  ASSERT_TRUE(write_dataset_cache(path.string(), key, entry));
  const std::string good = slurp(path);

  EXPECT_FALSE(read_dataset_cache(path.string(), key + 1, &warning).has_value());
  EXPECT_NE(warning.find("key"), std::string::npos) << warning;

  std::string bad = good;
  bad[0] = 'X';
  spit(path, bad);
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());
  EXPECT_NE(warning.find("magic"), std::string::npos) << warning;

  bad = good;
  bad[8] = 77;  // version
  spit(path, bad);
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());
  EXPECT_NE(warning.find("version"), std::string::npos) << warning;

  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, good.size() / 2, good.size() - 1}) {
    spit(path, good.substr(0, cut));
    warning.clear();
    EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value()) << cut;
    EXPECT_FALSE(warning.empty()) << cut;
  }
  spit(path, good + "junk");
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());

  bad = good;
  bad[24] = static_cast<char>(0xff);  // example count
  spit(path, bad);
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());

  // untrained_examples (the 7th i64 stat, after magic, version, reserved, key, count, total) above examples.
  bad = good;
  bad[40 + 6 * 8] = 4;  // 3 examples
  spit(path, bad);
  EXPECT_FALSE(read_dataset_cache(path.string(), key, &warning).has_value());
  EXPECT_NE(warning.find("stats do not match"), std::string::npos) << warning;

  spit(path, good);
  EXPECT_TRUE(read_dataset_cache(path.string(), key, &warning).has_value()) << warning;
}
