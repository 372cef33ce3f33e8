// trlhpc's Parquet reader against pyarrow: every fixture of tests/fixtures/parquet (written by pyarrow
// and by `datasets`, make_parquet_fixtures.py) reads to exactly the rows pyarrow's to_pylist() gave;
// a Parquet dataset tokenizes bit for bit like the same rows as JSON Lines; damaged files are UserErrors.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/reader.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/parquet/parquet_file.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc::parquet {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::string fixtures() { return testing::tests_dir() + "/fixtures/parquet"; }

std::vector<json> expected_rows(const std::string& name) {
  std::ifstream in(fixtures() + "/" + name + ".expected.jsonl");
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  return rows;
}

std::vector<json> read_rows(const std::string& path) {
  ParquetFile file(path);
  std::vector<json> rows;
  for (json row; file.next(row);) rows.push_back(row);
  return rows;
}

class PyarrowFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(PyarrowFixture, SameRowsAsPyarrow) {
  const std::vector<json> want = expected_rows(GetParam());
  const std::vector<json> got = read_rows(fixtures() + "/" + GetParam() + ".parquet");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "row " << i << ": got " << got[i].dump() << "\nwant " << want[i].dump();
}

INSTANTIATE_TEST_SUITE_P(Parquet, PyarrowFixture,
                         ::testing::Values("messages_snappy", "prompt_completion_zstd_v2", "conversational_prompt_completion_gzip",
                                           "pretokenized_plain_none", "scalars_nulls_v2", "scalars_nulls_v1_plain",
                                           "nested_corner_cases", "nested_corner_cases_v2_gzip", "datasets_messages"));

TEST(ParquetDataset, ShardsOfASplitReadInOrder) {
  const auto files = dataset::resolve_dataset_files(fixtures() + "/sharded", "train");
  ASSERT_EQ(files.size(), 2u);
  dataset::DatasetReader reader(files);
  const std::vector<json> want = expected_rows("sharded");
  dataset::DatasetRow row;
  size_t n = 0;
  while (reader.next(row)) {
    ASSERT_LT(n, want.size());
    EXPECT_EQ(row.value, want[n]) << row.where();
    ++n;
  }
  EXPECT_EQ(n, want.size());
  EXPECT_EQ(row.where(), files[1] + " row 7");
}

// The same rows, as Parquet and as JSON Lines, give identical tokenized examples.
TEST(ParquetDataset, TokenizesLikeTheEquivalentJsonLines) {
  const std::string dir = testing::make_temp_dir("parquet_vs_jsonl");
  {
    std::ofstream out(dir + "/rows.jsonl");
    for (const json& row : expected_rows("messages_snappy")) out << row.dump() << "\n";
  }
  const std::string tokenizer_dir = testing::tests_dir() + "/../examples/tiny-chat";
  const auto tok = tokenizer::Tokenizer::from_directory(tokenizer_dir);
  dataset::SftDataOptions o;
  o.tokenizer_dir = tokenizer_dir;
  o.assistant_only_loss = true;
  o.max_length = 512;
  o.dataset_name = fixtures() + "/messages_snappy.parquet";
  const auto from_parquet = dataset::SftDataset::tokenize(o, &tok);
  o.dataset_name = dir + "/rows.jsonl";
  const auto from_jsonl = dataset::SftDataset::tokenize(o, &tok);
  ASSERT_EQ(from_parquet.examples.size(), from_jsonl.examples.size());
  ASSERT_EQ(from_parquet.examples.size(), 40u);
  for (size_t i = 0; i < from_jsonl.examples.size(); ++i) {
    EXPECT_EQ(from_parquet.examples[i].input_ids, from_jsonl.examples[i].input_ids) << i;
    EXPECT_EQ(from_parquet.examples[i].loss_mask, from_jsonl.examples[i].loss_mask) << i;
  }
  fs::remove_all(dir);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string user_error_reading(const std::string& bytes) {
  const std::string dir = testing::make_temp_dir("parquet_bad");
  const std::string path = dir + "/bad.parquet";
  std::ofstream(path, std::ios::binary) << bytes;
  std::string message;
  try {
    read_rows(path);
  } catch (const UserError& e) {
    message = e.what();
  }
  fs::remove_all(dir);
  return message;
}

TEST(ParquetHostile, NotParquetAndTruncatedFilesNameTheFile) {
  EXPECT_NE(user_error_reading("{\"text\": \"a\"}\n").find("bad.parquet: not a Parquet file"), std::string::npos);
  const std::string good = read_bytes(fixtures() + "/messages_snappy.parquet");
  EXPECT_NE(user_error_reading(good.substr(0, good.size() / 2)).find("not a Parquet file"), std::string::npos);
  std::string huge_footer = good;
  huge_footer[huge_footer.size() - 6] = '\x7f';  // footer length far past the file
  EXPECT_NE(user_error_reading(huge_footer).find("footer length"), std::string::npos);
}

// Every single-byte corruption of a small file is read or refused with a UserError, never a crash.
TEST(ParquetHostile, ByteFlipsEndInRowsOrUserErrors) {
  const std::string good = read_bytes(fixtures() + "/nested_corner_cases.parquet");
  const std::string dir = testing::make_temp_dir("parquet_flip");
  const std::string path = dir + "/flip.parquet";
  int errors = 0;
  for (size_t i = 0; i < good.size(); i += 3) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    try {
      read_rows(path);
    } catch (const UserError& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(errors, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trlhpc::parquet

namespace trlhpc::parquet {
namespace {

// Found by fuzz_parquet: a column name with invalid UTF-8 became a JSON key that nlohmann cannot dump.
TEST(ParquetHostile, InvalidUtf8ColumnNameIsAUserError) {
  const std::string bytes = read_bytes(testing::tests_dir() + "/fuzz/corpus/fuzz_parquet/found-invalid-utf8-column-name.parquet");
  const std::string message = user_error_reading(bytes);
  EXPECT_NE(message.find("bad.parquet"), std::string::npos) << message;
}

}  // namespace
}  // namespace trlhpc::parquet
