// Dataset files -> rows (JSONL, JSON arrays, folders with splits), form detection and row validation.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/form.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;

std::string write_file(const std::string& dir, const std::string& name, const std::string& content) {
  fs::path path = fs::path(dir) / name;
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

std::vector<DatasetRow> read_all(const std::vector<std::string>& files, DatasetReaderOptions options = {}) {
  DatasetReader reader(files, options);
  std::vector<DatasetRow> rows;
  DatasetRow row;
  while (reader.next(row)) rows.push_back(row);
  return rows;
}

using trlhpc::testing::user_error;

std::vector<std::string> names(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(fs::path(p).filename().string());
  return out;
}

TEST(DatasetReader, JsonLinesKeepsLineNumbersAndSkipsBlankLines) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "d.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n\n   \n{\"text\": \"c\"}\n");
  auto rows = read_all({file});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].line, 1);
  EXPECT_EQ(rows[1].line, 2);
  EXPECT_EQ(rows[2].line, 5);
  EXPECT_EQ(rows[2].value["text"], "c");
  EXPECT_EQ(rows[2].where(), file + ":5");
}

TEST(DatasetReader, JsonArrayIsStreamedElementByElement) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "d.json",
                         "\xEF\xBB\xBF[\n  {\"text\": \"x ] } [ {\"},\n  {\"text\": \"quote \\\" ]\"},\n"
                         "  {\n    \"text\": \"multi\"\n  }\n]\n");
  auto rows = read_all({file});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].value["text"], "x ] } [ {");
  EXPECT_EQ(rows[1].value["text"], "quote \" ]");
  EXPECT_EQ(rows[2].value["text"], "multi");
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[2].line, 4);
}

TEST(DatasetReader, JsonFileWithOneObjectPerLineIsJsonLines) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "d.json", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n");
  EXPECT_EQ(read_all({file}).size(), 2u);
}

TEST(DatasetReader, MalformedJsonNamesFileAndLine) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\",}\n");
  std::string message = user_error([&] { read_all({file}); });
  EXPECT_NE(message.find(file + ":3: malformed JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("--skip_bad_rows"), std::string::npos) << message;

  auto array = write_file(dir, "bad.json", "[\n{\"text\": \"a\"},\n{\n\"text\": \"b\"\n\"x\": 1}\n]\n");
  message = user_error([&] { read_all({array}); });
  EXPECT_NE(message.find(array + ":5: malformed JSON"), std::string::npos) << message;

  auto unclosed = write_file(dir, "open.json", "[\n{\"text\": \"a\"},\n{\"text\": \"b\"}\n");
  message = user_error([&] { read_all({unclosed}); });
  EXPECT_NE(message.find("not closed"), std::string::npos) << message;
}

TEST(DatasetReader, RowThatIsNotAnObjectIsAnError) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "d.jsonl", "{\"text\": \"a\"}\n[1, 2]\n");
  std::string message = user_error([&] { read_all({file}); });
  EXPECT_NE(message.find(file + ":2: the row is a JSON array"), std::string::npos) << message;
}

TEST(DatasetReader, EmptyFilesAreErrors) {
  auto dir = testing::make_temp_dir("reader");
  for (const char* content : {"", "\n  \n", "[]", " [ \n ] "}) {
    auto file = write_file(dir, "empty.json", content);
    std::string message = user_error([&] { read_all({file}); });
    EXPECT_NE(message.find(file + ": the dataset file has no rows"), std::string::npos) << "'" << content << "'";
  }
  std::string message = user_error([&] { read_all({dir + "/missing.jsonl"}); });
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
}

TEST(DatasetReader, SkipBadRowsCountsThem) {
  auto dir = testing::make_temp_dir("reader");
  auto file = write_file(dir, "d.jsonl", "{\"text\": \"a\"}\n{oops\n42\n{\"text\": \"b\"}\n{\"text\": \n");
  DatasetReader reader({file}, {.skip_bad_rows = true});
  DatasetRow row;
  std::vector<int64_t> lines;
  while (reader.next(row)) lines.push_back(row.line);
  EXPECT_EQ(lines, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(reader.rows_read(), 2);
  EXPECT_EQ(reader.rows_skipped(), 3);
}

TEST(DatasetFiles, FileIsUsedAsIs) {
  auto dir = testing::make_temp_dir("files");
  auto file = write_file(dir, "anything.jsonl", "{}\n");
  EXPECT_EQ(resolve_dataset_files(file, "validation"), std::vector<std::string>{file});
  std::string message = user_error([&] { resolve_dataset_files(dir + "/nope.jsonl"); });
  EXPECT_NE(message.find("no such file or folder"), std::string::npos) << message;
}

TEST(DatasetFiles, FolderWithSplitFiles) {
  auto dir = testing::make_temp_dir("files");
  write_file(dir, "train.jsonl", "{}\n");
  write_file(dir, "test.jsonl", "{}\n");
  write_file(dir, "README.md", "x");
  EXPECT_EQ(names(resolve_dataset_files(dir, "train")), std::vector<std::string>{"train.jsonl"});
  EXPECT_EQ(names(resolve_dataset_files(dir, "test")), std::vector<std::string>{"test.jsonl"});
  std::string message = user_error([&] { resolve_dataset_files(dir, "validation"); });
  EXPECT_NE(message.find("no split \"validation\" (--dataset_train_split); its splits: train, test, as"), std::string::npos) << message;
  EXPECT_NE(message.find("it holds: test.jsonl, train.jsonl"), std::string::npos) << message;
}

TEST(DatasetFiles, ShardsSubfoldersAndDataFolder) {
  auto dir = testing::make_temp_dir("files");
  write_file(dir, "train-00001-of-00002.jsonl", "{}\n");
  write_file(dir, "train-00000-of-00002.jsonl", "{}\n");
  write_file(dir, "pretrain.jsonl", "{}\n");  // "train" not at a delimiter: not the train split
  write_file(dir, ".cache/train.jsonl", "{}\n");
  EXPECT_EQ(names(resolve_dataset_files(dir, "train")),
            (std::vector<std::string>{"train-00000-of-00002.jsonl", "train-00001-of-00002.jsonl"}));

  auto folder = testing::make_temp_dir("files");
  write_file(folder, "train/b.json", "[{}]");
  write_file(folder, "train/a.jsonl", "{}\n");
  write_file(folder, "data/validation-0.jsonl", "{}\n");
  EXPECT_EQ(names(resolve_dataset_files(folder, "train")), (std::vector<std::string>{"a.jsonl", "b.json"}));
  // As in `datasets`: a split folder decides alone, so data/validation-0.jsonl names no split here.
  EXPECT_NE(user_error([&] { resolve_dataset_files(folder, "validation"); }).find("its splits: train, as"), std::string::npos);
  write_file(folder, "validation/v.jsonl", "{}\n");
  EXPECT_EQ(names(resolve_dataset_files(folder, "validation")), std::vector<std::string>{"v.jsonl"});
}

TEST(DatasetFiles, UnnamedFilesAreTheTrainSplit) {
  auto dir = testing::make_temp_dir("files");
  write_file(dir, "part2.jsonl", "{}\n");
  write_file(dir, "part1.json", "[{}]");
  EXPECT_EQ(names(resolve_dataset_files(dir, "train")), (std::vector<std::string>{"part1.json", "part2.jsonl"}));
  EXPECT_NE(user_error([&] { resolve_dataset_files(dir, "test"); }), "");
}

TEST(DatasetFiles, RealDatasetsRead) {
  std::string base = testing::shared_data_dir() + "/datasets/";
  if (!fs::exists(base + "conversations.jsonl")) GTEST_SKIP() << "no shared data at " << base;
  DatasetReader conversations(resolve_dataset_files(base + "conversations.jsonl"));
  auto scan = scan_dataset(conversations, "text", [](const DatasetRow&, const DatasetFormSpec&) {});
  EXPECT_EQ(scan.form.form, DatasetForm::kConversational);
  EXPECT_EQ(scan.rows, 500);
  DatasetReader c4(resolve_dataset_files(base + "c4_text.jsonl"));
  scan = scan_dataset(c4, "text", [](const DatasetRow&, const DatasetFormSpec&) {});
  EXPECT_EQ(scan.form.form, DatasetForm::kLanguageModeling);
  EXPECT_EQ(scan.rows, 300);
}

DatasetRow make_row(const std::string& json, int64_t line = 1) {
  return DatasetRow{"d.jsonl", line, nlohmann::ordered_json::parse(json)};
}

TEST(DatasetForm, DetectsEachForm) {
  EXPECT_EQ(detect_dataset_form(make_row(R"({"text": "hi"})")).form, DatasetForm::kLanguageModeling);
  auto custom = detect_dataset_form(make_row(R"({"body": "hi"})"), "body");
  EXPECT_EQ(custom.form, DatasetForm::kLanguageModeling);
  EXPECT_EQ(custom.text_field, "body");
  EXPECT_EQ(detect_dataset_form(make_row(R"({"prompt": "a", "completion": "b"})")).form,
            DatasetForm::kPromptCompletion);
  EXPECT_EQ(detect_dataset_form(make_row(R"({"prompt": [{"role": "user", "content": "a"}],
                                            "completion": [{"role": "assistant", "content": "b"}]})"))
                .form,
            DatasetForm::kConversationalPromptCompletion);
  EXPECT_EQ(detect_dataset_form(make_row(R"({"messages": [{"role": "user", "content": "a"}]})")).form,
            DatasetForm::kConversational);
  auto sharegpt = detect_dataset_form(make_row(R"({"conversations": [{"from": "user", "value": "a"}]})"));
  EXPECT_TRUE(sharegpt.from_value);
  EXPECT_EQ(sharegpt.messages_field, "conversations");
  auto tokens = detect_dataset_form(make_row(R"({"input_ids": [1, 2], "assistant_masks": [0, 1]})"));
  EXPECT_EQ(tokens.form, DatasetForm::kPreTokenized);
  EXPECT_TRUE(tokens.has_assistant_masks);
  EXPECT_FALSE(tokens.has_completion_mask);
  std::string message = user_error([] { detect_dataset_form(make_row(R"({"foo": 1})", 7)); });
  EXPECT_NE(message.find("d.jsonl:7: cannot tell the dataset form"), std::string::npos) << message;
}

TEST(DatasetForm, RowProblemsNameTheRow) {
  auto chat = detect_dataset_form(make_row(R"({"messages": [{"role": "user", "content": "a"}]})"));
  auto error_of = [&](const DatasetFormSpec& spec, const std::string& json) {
    return user_error([&] { validate_row(spec, make_row(json, 12)); });
  };
  std::string message = error_of(chat, R"({"text": "x"})");
  EXPECT_NE(message.find("d.jsonl:12: the row has no \"messages\" field"), std::string::npos) << message;
  message = error_of(chat, R"({"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]})");
  EXPECT_NE(message.find("d.jsonl:12: message 2 of \"messages\" has role \"robot\""), std::string::npos) << message;
  message = error_of(chat, R"({"messages": [{"role": "user", "content": 5}]})");
  EXPECT_NE(message.find("number \"content\", not a string"), std::string::npos) << message;
  EXPECT_EQ(error_of(chat, R"({"messages": [{"role": "assistant", "content": null, "tool_calls": []},
                                            {"role": "tool", "content": [{"type": "text", "text": "r"}]}]})"),
            "");
  EXPECT_NE(error_of(chat, R"({"messages": []})"), "");

  auto text = detect_dataset_form(make_row(R"({"text": "hi"})"));
  message = error_of(text, R"({"text": ["not", "a", "string"]})");
  EXPECT_NE(message.find("\"text\" is a array, not a string"), std::string::npos) << message;
  auto pc = detect_dataset_form(make_row(R"({"prompt": "a", "completion": "b"})"));
  EXPECT_NE(error_of(pc, R"({"prompt": "a"})").find("no \"completion\" field"), std::string::npos);

  auto tokens = detect_dataset_form(make_row(R"({"input_ids": [1, 2], "completion_mask": [0, 1]})"));
  EXPECT_NE(error_of(tokens, R"({"input_ids": [1, 2, 3], "completion_mask": [0, 1]})").find("has 2 entries"),
            std::string::npos);
  EXPECT_NE(error_of(tokens, R"({"input_ids": [1, -2], "completion_mask": [0, 1]})").find("not a token id"),
            std::string::npos);
  EXPECT_NE(error_of(tokens, R"({"input_ids": [1, 2], "completion_mask": [0, 2]})").find("not 0 or 1"),
            std::string::npos);
}

TEST(DatasetForm, ScanSkipsRowsThatDoNotFitWhenAsked) {
  auto dir = testing::make_temp_dir("form");
  auto file = write_file(dir, "d.jsonl",
                         "{\"nothing\": 1}\n"                                            // no form: skipped
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n"  // detects the form
                         "{\"messages\": [{\"role\": \"bot\", \"content\": \"a\"}]}\n"   // unknown role
                         "not json\n"
                         "{\"text\": \"x\"}\n"                                           // missing field
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}\n");
  DatasetReader reader({file}, {.skip_bad_rows = true});
  std::vector<int64_t> lines;
  auto scan = scan_dataset(reader, "text", [&](const DatasetRow& row, const DatasetFormSpec&) {
    lines.push_back(row.line);
  });
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(scan.skipped_invalid, 3);
  EXPECT_EQ(scan.skipped_malformed, 1);
  EXPECT_EQ(scan.form.detected_at, file + ":2");

  DatasetReader strict({file});
  std::string message = user_error([&] { scan_dataset(strict, "text", [](auto&, auto&) {}); });
  EXPECT_NE(message.find(file + ":1: cannot tell the dataset form"), std::string::npos) << message;
}

TEST(DatasetForm, ChatmlConversionAndCompletionOnlyDefault) {
  auto row = nlohmann::ordered_json::parse(R"({"conversations": [{"from": "user", "value": "hi"}]})");
  convert_to_chatml(row);
  EXPECT_EQ(row, nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"));
  auto pc = detect_dataset_form(make_row(R"({"prompt": "a", "completion": "b"})"));
  auto lm = detect_dataset_form(make_row(R"({"text": "a"})"));
  EXPECT_TRUE(resolve_completion_only_loss(std::nullopt, pc));
  EXPECT_FALSE(resolve_completion_only_loss(std::nullopt, lm));
  EXPECT_FALSE(resolve_completion_only_loss(false, pc));
}

TEST(DatasetForm, PretokenizedExampleMasks) {
  auto row = make_row(R"({"input_ids": [5, 6, 7, 8], "completion_mask": [0, 0, 1, 1],
                          "assistant_masks": [0, 1, 1, 0]})");
  auto spec = detect_dataset_form(row);
  auto with_completion = pretokenized_example(spec, row, true);
  EXPECT_EQ(with_completion.input_ids, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(with_completion.loss_mask, (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(pretokenized_example(spec, row, false).loss_mask, (std::vector<uint8_t>{0, 1, 1, 0}));
}

}  // namespace
}  // namespace trlhpc::dataset
