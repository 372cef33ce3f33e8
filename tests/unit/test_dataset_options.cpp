// The dataset options of `trlhpc sft` as TRL's sft.py uses them: a `datasets:` mixture in --config,
// --dataset_train_split / --dataset_test_split / --eval_strategy choosing the train and eval sources,
// test_split_size cutting the mixture into two disjoint sides, and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/train/sft_data.hpp"
#include "trlhpc/train/sft_validation.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;
using testing::user_error;

SftConfig parsed(const std::vector<std::string>& args) {
  SftConfig config;
  EXPECT_TRUE(parse_sft_options(args, config, nullptr, SftOptionContext{1, false}));
  return config;
}

std::string write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(DatasetOptions, MixtureFromTheConfigFile) {
  const std::string dir = testing::make_temp_dir("dataset_options");
  const std::string yaml = write(dir + "/mix.yaml",
                                 "max_steps: 3\ndatasets:\n  - path: a\n    columns: [messages]\n  - path: b\n"
                                 "    name: fr\n    split: validation\n    data_files: {validation: v/*.jsonl}\n"
                                 "streaming: true\ntest_split_size: 0.1\n");
  const SftConfig c = parsed({"--config", yaml, "--eval_strategy", "steps"});
  ASSERT_EQ(c.datasets.size(), 2u);
  EXPECT_EQ(c.datasets_config_file, yaml);
  EXPECT_EQ(c.datasets[0].columns, std::vector<std::string>{"messages"});
  EXPECT_EQ(c.datasets[1].name, "fr");
  EXPECT_EQ(c.datasets[1].split, "validation");
  EXPECT_EQ(c.datasets[1].data_files->front().second, std::vector<std::string>{"v/*.jsonl"});
  EXPECT_TRUE(c.streaming);
  EXPECT_DOUBLE_EQ(c.test_split_size, 0.1);
  EXPECT_EQ(c.max_steps, 3);

  const dataset::DatasetSource train = dataset_source(c, DatasetRole::kTrain), eval = dataset_source(c, DatasetRole::kEval);
  EXPECT_EQ(train.entries.size(), 2u);
  EXPECT_FALSE(train.test_side);
  EXPECT_TRUE(eval.test_side);
  EXPECT_DOUBLE_EQ(*eval.test_split_size, 0.1);
  EXPECT_TRUE(evaluates(c));

  const std::string bad = write(dir + "/bad.yaml", "datasets:\n  - path: a\n  - split: train\n");
  EXPECT_NE(user_error([&] { parsed({"--config", bad}); }).find(bad + ": datasets[1]: no path:"), std::string::npos);
  fs::remove_all(dir);
}

TEST(DatasetOptions, EvalStepsDefaultToLoggingStepsAsInTrainingArguments) {
  EXPECT_EQ(parsed({"--eval_strategy", "steps", "--logging_steps", "3"}).eval_steps, 3);
  EXPECT_EQ(parsed({"--eval_strategy", "steps", "--logging_steps", "3", "--eval_steps", "5"}).eval_steps, 5);
  EXPECT_EQ(parsed({"--logging_steps", "3"}).eval_steps, 0);  // eval_strategy no: unchanged
}

TEST(DatasetOptions, SplitsOfTheRoles) {
  SftConfig c;
  c.dataset_name = "ds";
  c.dataset_config = "en";
  EXPECT_FALSE(evaluates(c));  // TRL's default eval_strategy "no"
  const dataset::DatasetEntry train = dataset_source(c, DatasetRole::kTrain).entries.at(0);
  EXPECT_EQ(train.split, "train");
  EXPECT_EQ(train.name, "en");
  EXPECT_EQ(train.split_option, "--dataset_train_split");
  c.eval_strategy = "steps";
  c.dataset_test_split = "validation";
  const dataset::DatasetEntry eval = dataset_source(c, DatasetRole::kEval).entries.at(0);
  EXPECT_EQ(eval.split, "validation");
  EXPECT_EQ(eval.split_option, "--dataset_test_split");
  EXPECT_FALSE(eval.single_split_fallback);
  c.eval_dataset = "held_out";
  const dataset::DatasetEntry separate = dataset_source(c, DatasetRole::kEval).entries.at(0);
  EXPECT_EQ(separate.path, "held_out");
  EXPECT_TRUE(separate.single_split_fallback);  // a folder of unnamed files is one split: the whole folder

  SftConfig mixture;
  mixture.datasets.resize(1);
  mixture.datasets_config_file = "mix.yaml";
  mixture.eval_strategy = "steps";
  EXPECT_NE(user_error([&] { dataset_source(mixture, DatasetRole::kEval); }).find("mix.yaml has none: set test_split_size"),
            std::string::npos);
}

TEST(DatasetOptions, ValidationNamesTheFlag) {
  auto error_of = [](const std::function<void(SftConfig&)>& change) {
    SftConfig c;
    change(c);
    return user_error([&] { validate_sft_options(c); });
  };
  EXPECT_NE(error_of([](SftConfig& c) { c.eval_strategy = "epoch"; }).find("--eval_strategy epoch: use no or steps"), std::string::npos);
  EXPECT_NE(error_of([](SftConfig& c) { c.datasets.resize(1), c.test_split_size = 1; }).find("--test_split_size 1: must be a fraction"),
            std::string::npos);
  EXPECT_NE(error_of([](SftConfig& c) { c.test_split_size = 0.2; }).find("there is none"), std::string::npos);
  EXPECT_EQ(error_of([](SftConfig& c) { c.datasets.resize(1), c.test_split_size = 0.2, c.eval_strategy = "steps"; }), "");
}

// test_split_size through tokenization: the two sides are disjoint, cover every row, have
// ceil(size * rows) test rows, and come out alike on every call (the cut is seeded).
TEST(DatasetOptions, TestSplitSizeCutsTheMixtureIntoTwoSides) {
  const std::string dir = testing::make_temp_dir("dataset_split");
  std::string a, b;
  for (int i = 0; i < 7; ++i) a += "{\"input_ids\": [" + std::to_string(100 + i) + ", 1]}\n";
  for (int i = 7; i < 12; ++i) b += "{\"input_ids\": [" + std::to_string(100 + i) + ", 1], \"extra\": 0}\n";
  write(dir + "/a/train.jsonl", a);
  write(dir + "/b/train.jsonl", b);
  dataset::SftDataOptions o;
  o.dataset_name = "mixture";
  for (const char* name : {"a", "b"}) {
    dataset::DatasetEntry e;
    e.path = dir + "/" + name;
    e.columns = {"input_ids"};
    e.origin = name;
    o.source.entries.push_back(e);
  }
  o.source.test_split_size = 0.25;
  o.seed = 7;
  auto first_ids = [&](bool test_side) {
    o.source.test_side = test_side;
    std::vector<int32_t> ids;
    for (const auto& ex : dataset::SftDataset::tokenize(o, nullptr).examples) ids.push_back(ex.input_ids.front());
    return ids;
  };
  const std::vector<int32_t> train = first_ids(false), test = first_ids(true);
  EXPECT_EQ(test.size(), 3u);  // ceil(0.25 * 12)
  EXPECT_EQ(train.size(), 9u);
  std::vector<int32_t> all = train;
  all.insert(all.end(), test.begin(), test.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], 100 + i);
  EXPECT_EQ(first_ids(false), train);
  std::vector<int32_t> in_file_order = train;
  std::sort(in_file_order.begin(), in_file_order.end());
  EXPECT_NE(train, in_file_order);  // train_test_split shuffles the train side too
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trlhpc
