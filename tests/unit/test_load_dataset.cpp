// load_dataset semantics (data/dataset/dataset_source.hpp): split inference, README configs:, data_files
// globs and TRL's datasets: mixtures, against what the `datasets` library and TRL's get_dataset read from
// the same folders (tests/fixtures/load_dataset/expected.json, make_load_dataset_fixtures.py).
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/data/dataset/data_files.hpp"
#include "trlhpc/data/dataset/dataset_card.hpp"
#include "trlhpc/data/dataset/dataset_mixture.hpp"
#include "trlhpc/data/dataset/dataset_source.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using trlhpc::testing::user_error;

std::string fixtures() { return trlhpc::testing::tests_dir() + "/fixtures/load_dataset"; }

json expected() {
  std::ifstream in(fixtures() + "/expected.json");
  return json::parse(in);
}

std::vector<std::string> texts(const std::vector<DatasetPart>& parts) {
  DatasetReader reader(parts);
  std::vector<std::string> out;
  DatasetRow row;
  while (reader.next(row)) out.push_back(row.value.at("text").get<std::string>());
  return out;
}

DatasetEntry entry(const std::string& c, const std::string& split, const std::string& name = "") {
  DatasetEntry e;
  e.path = fixtures() + "/" + c;
  e.split = split;
  e.name = name;
  e.origin = "--dataset_name " + c;
  e.split_option = "--dataset_train_split";
  return e;
}

std::vector<std::string> rows_of(const DatasetEntry& e) { return texts({{resolve_entry_files(e), {}, e.origin}}); }

// Every split load_dataset found, with the same rows in the same order; and a split it did not find is
// an error that lists exactly its splits, in its order.
void expect_same_splits(const DatasetEntry& base, const json& want, const std::string& label) {
  std::string listed;
  for (const auto& split : want["splits"]) {
    DatasetEntry e = base;
    e.split = split.get<std::string>();
    EXPECT_EQ(rows_of(e), want["rows"][e.split].get<std::vector<std::string>>()) << label << " split " << e.split;
    listed += (listed.empty() ? "" : ", ") + e.split;
  }
  DatasetEntry missing = base;
  missing.split = "nosuchsplit";
  const std::string message = user_error([&] { resolve_entry_files(missing); });
  EXPECT_NE(message.find("no split \"nosuchsplit\" (--dataset_train_split); its splits: " + listed + ", as Hugging Face"), std::string::npos)
      << label << ": " << message;
}

TEST(LoadDataset, SplitsInferredAsTheDatasetsLibraryDoes) {
  const json want = expected();
  for (const char* c : {"flat", "sharded", "folders", "keywords", "unnamed"})
    expect_same_splits(entry(c, "train"), want["cases"][c], c);
}

TEST(LoadDataset, ReadmeConfigsChooseFilesAndTheDefault) {
  const json want = expected();
  for (const char* c : {"configs", "nodefault", "named_default"}) {
    for (const auto& [name, config] : want["cases"][c]["configs"].items())
      expect_same_splits(entry(c, "train", name), config, std::string(c) + " config " + name);
    if (want["cases"][c].contains("error")) {
      const std::string message = user_error([&] { resolve_entry_files(entry(c, "train")); });
      EXPECT_NE(message.find("several configs and none is the default: a, b"), std::string::npos) << message;
      EXPECT_NE(message.find("--dataset_config NAME"), std::string::npos) << message;
    } else {
      expect_same_splits(entry(c, "train"), want["cases"][c], std::string(c) + " default config");
    }
  }
  const std::string unknown = user_error([&] { resolve_entry_files(entry("configs", "train", "de")); });
  EXPECT_NE(unknown.find("no config \"de\"; its README.md declares: en, plain, fr"), std::string::npos) << unknown;
}

TEST(LoadDataset, MixtureRowsInTrlsOrder) {
  const json want = expected();
  // The entries as a --config YAML file would hold them (JSON is YAML's flow style).
  const YAML::Node node = YAML::Load(want["mixture"]["entries"].dump());
  std::vector<DatasetEntry> entries = parse_dataset_mixture(node, "mix.yaml");
  for (DatasetEntry& e : entries) e.path = fixtures() + "/" + e.path;
  DatasetSource source{entries, std::nullopt, false, "mix.yaml: datasets"};
  const std::vector<DatasetPart> parts = resolve_source(source);
  std::vector<std::string> want_texts;
  for (const auto& row : want["mixture"]["rows"]) want_texts.push_back(row["text"]);
  EXPECT_EQ(texts(parts), want_texts);

  // columns: [text] keeps only that column (datasets then fills the other entries' columns with null
  // when it concatenates; trlhpc keeps each row's own selection).
  DatasetReader reader(parts);
  DatasetRow row;
  while (reader.next(row)) {
    const bool selected = row.value.at("text").get<std::string>().rfind("sharded/", 0) == 0;
    EXPECT_EQ(row.value.contains("source"), !selected) << row.value.dump();
  }
}

TEST(LoadDataset, MixtureEntryErrorsNameTheFileAndTheEntry) {
  auto error_of = [](const std::string& yaml) {
    return user_error([&] { parse_dataset_mixture(YAML::Load(yaml), "mix.yaml"); });
  };
  EXPECT_NE(error_of("[{path: a}, {name: x}]").find("mix.yaml: datasets[1]: no path:"), std::string::npos);
  EXPECT_NE(error_of("[{path: a, colums: [x]}]").find("mix.yaml: datasets[0]: unknown key 'colums'"), std::string::npos);
  EXPECT_NE(error_of("[{path: a, fraction: 0.5}]").find("datasets[0]: fraction is not supported"), std::string::npos);
  EXPECT_NE(error_of("[{path: a, columns: text}]").find("datasets[0]: columns must be a non-empty list"), std::string::npos);
  EXPECT_NE(error_of("{path: a}").find("mix.yaml: datasets must be a list"), std::string::npos);
  EXPECT_NE(error_of("[{path: a, data_files: {bad-split: x}}]").find("not a valid split name"), std::string::npos);
  // An entry's missing split names the entry and its split: key.
  DatasetEntry e = parse_dataset_mixture(YAML::Load("[{path: flat, split: dev}]"), "mix.yaml").front();
  e.path = fixtures() + "/flat";
  const std::string message = user_error([&] { resolve_entry_files(e); });
  EXPECT_NE(message.find("mix.yaml: datasets[0] (path: "), std::string::npos) << message;
  EXPECT_NE(message.find("no split \"dev\" (its split: key); its splits: train, validation, test"),
            std::string::npos) << message;
  // A data_files name that is not there (no wildcard) is an error, as in datasets.
  e = parse_dataset_mixture(YAML::Load("[{path: flat, data_files: nope.jsonl}]"), "mix.yaml").front();
  e.path = fixtures() + "/flat";
  EXPECT_NE(user_error([&] { resolve_entry_files(e); }).find("data_files names nope.jsonl"), std::string::npos);
}

TEST(LoadDataset, GlobsFollowFsspec) {
  EXPECT_TRUE(glob_matches("data/train-*.parquet", "data/train-00000-of-00001.parquet"));
  EXPECT_FALSE(glob_matches("data/train-*.parquet", "data/sub/train-0.parquet"));  // '*' stays in a segment
  EXPECT_TRUE(glob_matches("**/train/**", "train/a.jsonl"));                       // "**" may be no folder
  EXPECT_TRUE(glob_matches("**/train/**", "x/y/train/z/a.jsonl"));
  EXPECT_FALSE(glob_matches("**/validation[-._ 0-9]*/**", "data/validation-0.jsonl"));  // a file is no folder
  EXPECT_TRUE(glob_matches("**/train[-._ 0-9]*", "train-0.jsonl"));
  EXPECT_FALSE(glob_matches("**/train[-._ 0-9]*", "trainer.jsonl"));
  EXPECT_TRUE(glob_matches("**/*[-._ 0-9]train[-._ 0-9]*", "a/my.train.json"));
  EXPECT_TRUE(glob_matches("part[!0-4].json", "part7.json"));
  EXPECT_FALSE(glob_matches("part[!0-4].json", "part3.json"));
  EXPECT_TRUE(glob_matches("a?c[", "abc["));  // an unterminated class is a literal '['
  // Long patterns of stars stay fast (no exponential backtracking).
  EXPECT_FALSE(glob_matches(std::string(200, '*') + "x/" + std::string(200, '*') + "y", std::string(300, 'a') + "/b"));
  const std::string escape = user_error([] { select_data_files({"a.jsonl"}, {"../secret/*"}, "card"); });
  EXPECT_NE(escape.find("without \"..\""), std::string::npos) << escape;
}

TEST(LoadDataset, CardParsingAndItsErrors) {
  const std::vector<DatasetCardConfig> configs = parse_dataset_card_configs(
      "---\nlicense: mit\nconfigs:\n- config_name: a\n  data_files: x/*.jsonl\n- config_name: b\n  default: true\n"
      "  data_dir: b\n  data_files:\n  - split: train\n    path: [b/t1, b/t2]\n  - split: test\n    path: b/e\n---\nbody\n",
      "README.md");
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].name, "a");
  ASSERT_TRUE(configs[0].data_files.has_value());
  EXPECT_EQ(configs[0].data_files->at(0), (std::pair<std::string, std::vector<std::string>>{"train", {"x/*.jsonl"}}));
  EXPECT_TRUE(configs[1].is_default);
  EXPECT_EQ(configs[1].data_dir, "b");
  EXPECT_EQ(configs[1].data_files->at(1).first, "test");
  EXPECT_EQ(*default_dataset_config(configs, "README.md"), 1u);
  EXPECT_TRUE(parse_dataset_card_configs("# no front matter\n", "README.md").empty());
  EXPECT_TRUE(parse_dataset_card_configs("---\nlicense: mit\n---\n", "README.md").empty());

  auto error_of = [](const std::string& yaml) {
    return user_error([&] { parse_dataset_card_configs("---\n" + yaml + "\n---\n", "ds/README.md"); });
  };
  EXPECT_NE(error_of("configs:\n- data_files: x").find("ds/README.md: every entry of configs needs a config_name"), std::string::npos);
  EXPECT_NE(error_of("configs:\n- config_name: a\n- config_name: a").find("config a is declared twice"), std::string::npos);
  EXPECT_NE(error_of("configs:\n- config_name: a\n  data_files:\n  - split: train").find("each data_files entry must be"),
            std::string::npos);
  EXPECT_NE(error_of("configs: [\n").find("ds/README.md: invalid YAML front matter"), std::string::npos);
  EXPECT_NE(error_of("configs: {a: 1}").find("configs must be a list"), std::string::npos);
  const std::vector<DatasetCardConfig> two = parse_dataset_card_configs(
      "---\nconfigs:\n- config_name: default\n- config_name: b\n  default: true\n---\n", "README.md");
  EXPECT_NE(user_error([&] { default_dataset_config(two, "README.md"); }).find("default and b are both default"), std::string::npos);
  // data_dir escaping the dataset folder is refused.
  const std::string dir = trlhpc::testing::make_temp_dir("card");
  fs::create_directories(dir + "/ds");
  std::ofstream(dir + "/ds/README.md") << "---\nconfigs:\n- config_name: x\n  data_dir: ../..\n---\n";
  DatasetEntry e;
  e.path = dir + "/ds";
  e.origin = "--dataset_name ds";
  EXPECT_NE(user_error([&] { resolve_entry_files(e); }).find("must be a folder inside the dataset"), std::string::npos);
  fs::remove_all(dir);
}

TEST(LoadDataset, ShardSplitNamesAreChecked) {
  EXPECT_NE(user_error([] { infer_splits({"data/bad-name!-00000-of-00001.jsonl"}, "ds"); }).find("not a valid split name"),
            std::string::npos);
  EXPECT_TRUE(infer_splits({}, "ds").empty());
}

TEST(LoadDataset, SubsetFolderWithoutACard) {
  const std::string dir = trlhpc::testing::make_temp_dir("subset");
  fs::create_directories(dir + "/ds/en");
  std::ofstream(dir + "/ds/en/train.jsonl") << "{\"text\": \"en\"}\n";
  DatasetEntry e;
  e.path = dir + "/ds";
  e.name = "en";
  e.origin = "--dataset_name ds";
  e.split_option = "--dataset_train_split";
  EXPECT_EQ(resolve_entry_files(e), std::vector<std::string>{dir + "/ds/en/train.jsonl"});
  e.name = "fr";
  const std::string message = user_error([&] { resolve_entry_files(e); });
  EXPECT_NE(message.find("no config \"fr\""), std::string::npos) << message;
  EXPECT_NE(message.find("--dataset_config"), std::string::npos) << message;
  e.name = "..";
  EXPECT_NE(user_error([&] { resolve_entry_files(e); }), "");
  fs::remove_all(dir);
}

TEST(LoadDataset, TrainTestCutIsAPartitionThatRepeats) {
  const std::vector<int64_t> train = split_rows(10, 0.25, 42, false, "mix"), test = split_rows(10, 0.25, 42, true, "mix");
  EXPECT_EQ(test.size(), 3u);  // ceil(0.25 * 10), as datasets' train_test_split
  EXPECT_EQ(train.size(), 7u);
  std::vector<int64_t> all = train;
  all.insert(all.end(), test.begin(), test.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], i);
  EXPECT_EQ(split_rows(10, 0.25, 42, false, "mix"), train);
  EXPECT_NE(split_rows(10, 0.25, 43, true, "mix"), test);
  EXPECT_NE(user_error([] { split_rows(1, 0.5, 42, false, "mix.yaml: datasets"); }).find("mix.yaml: datasets: test_split_size"),
            std::string::npos);
}

}  // namespace
}  // namespace trlhpc::dataset
