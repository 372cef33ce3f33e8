#pragma once
// Streaming readers for dataset files: JSON Lines (.jsonl, or .json holding one object per line), JSON
// arrays (.json whose first character is '['), Parquet (.parquet, the format of Hub datasets; rows as
// data/parquet/parquet_file.hpp builds them), and directories of them. Rows come out one at a time
// with the file and the 1-based line where they start, so memory stays at one row whatever the file size
// (a 1 GB JSONL file is read line by line; a JSON array is cut into its elements by a small brace/string
// scanner and each element is parsed on its own).
//
// `--dataset_name PATH --dataset_train_split SPLIT` resolve as Hugging Face `datasets.load_dataset` does
// for a local folder (data_files.hpp for the split rules, dataset_source.hpp for configs and mixtures):
// a file is itself whatever the split; a folder's files are split by push_to_hub shard names, split
// folders, split words in file names, else all "train". A missing split is a UserError that lists the
// splits there are and what the folder holds.
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trlhpc::parquet {
class ParquetFile;
}

namespace trlhpc::dataset {

// How deeply a row's JSON may nest (objects and arrays inside each other). Dataset rows are untrusted
// input that later code walks recursively (chat-template values, error messages); real rows nest under
// 10 levels (messages -> message -> content blocks / tool calls -> arguments).
inline constexpr int kMaxRowNesting = 100;

// One row of a dataset file.
struct DatasetRow {
  std::string file;      // path as given/resolved
  int64_t line = 0;      // 1-based line where the row starts (Parquet: 1-based row number in the file)
  nlohmann::ordered_json value;  // the parsed JSON object
  bool parquet = false;  // line is a row number
  int64_t index = 0;     // 0-based position among the rows the reader handed out (all files, all parts)

  // "path/to/file.jsonl:17" or "path/to/train.parquet row 17", the prefix of every message about this row.
  std::string where() const { return file + (parquet ? " row " : ":") + std::to_string(line); }
};

struct DatasetReaderOptions {
  // --skip_bad_rows: a malformed row is counted and skipped instead of stopping with a UserError.
  bool skip_bad_rows = false;
};

// The files `--dataset_name PATH` with `--dataset_train_split SPLIT` stands for, in reading order (one
// load_dataset entry, dataset_source.hpp). UserError when PATH does not exist or has no split SPLIT.
std::vector<std::string> resolve_dataset_files(const std::string& dataset_name, const std::string& split = "train");

// Files read one after the other as one dataset, keeping only `columns` of their rows (in that order;
// a column a row lacks is null there, one no row of the part has is a UserError naming `origin`), as
// `datasets` select_columns does for one entry of a mixture. Empty columns: the rows as they are.
struct DatasetPart {
  std::vector<std::string> files;
  std::vector<std::string> columns;
  std::string origin;
};

namespace detail {
// Cuts the top-level array of a JSON text stream into the text of its elements, one at a time, without
// holding more than one element in memory. Tracks strings and escapes so brackets inside strings do not
// count. Used by DatasetReader for .json array files.
class JsonArrayElementScanner {
 public:
  JsonArrayElementScanner(std::istream& in, std::string file);
  // Fills `text` with the next element's source text and `line` with the line it starts on.
  // Returns false after the closing ']'. UserError on text that is not an array of values.
  bool next(std::string& text, int64_t& line);

 private:
  int get();
  int peek_non_space();
  std::istream& in_;
  std::string file_;
  int64_t line_ = 1;
  bool started_ = false;
  bool finished_ = false;
};
}  // namespace detail

// Reads the rows of a list of files in order.
//   DatasetReader reader(resolve_dataset_files(path, "train"), {});
//   DatasetRow row;
//   while (reader.next(row)) use(row);
// Errors (UserError, naming file and line, saying what to do): a file that cannot be opened, malformed
// JSON, a row that is not a JSON object, a file with no rows (empty or only blank lines). With
// skip_bad_rows, malformed rows and non-object rows are skipped and counted; an empty file still fails.
class DatasetReader {
 public:
  DatasetReader(std::vector<std::string> files, DatasetReaderOptions options = {});
  // Parts in order (a mixture's entries), each with its column selection.
  DatasetReader(const std::vector<DatasetPart>& parts, DatasetReaderOptions options = {});
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  // Next row into `row`; false once every file is exhausted.
  bool next(DatasetRow& row);

  const std::vector<std::string>& files() const { return files_; }
  const DatasetReaderOptions& options() const { return options_; }
  int64_t rows_read() const { return rows_read_; }        // rows handed out so far
  int64_t rows_skipped() const { return rows_skipped_; }  // malformed rows skipped (skip_bad_rows only)

 private:
  enum class FileKind { kJsonLines, kJsonArray, kParquet };
  bool open_next_file();
  bool next_in_file(DatasetRow& row);
  bool accept(const std::string& text, int64_t line, DatasetRow& row);
  void finish_file();
  void select_columns(DatasetRow& row);
  void finish_part();

  std::vector<std::string> files_;
  std::vector<DatasetPart> parts_;       // empty for the plain files constructor
  std::vector<size_t> part_of_file_;     // parts_ index of each file
  size_t current_part_ = 0;
  std::vector<bool> column_seen_;        // per column of the current part: some row had it
  DatasetReaderOptions options_;
  size_t next_file_ = 0;
  std::ifstream stream_;
  FileKind kind_ = FileKind::kJsonLines;
  std::unique_ptr<detail::JsonArrayElementScanner> scanner_;
  std::unique_ptr<parquet::ParquetFile> parquet_;
  std::string current_file_;
  int64_t line_ = 0;              // last line read in a JSONL file
  int64_t rows_in_file_ = 0;      // good rows of the current file
  int64_t entries_in_file_ = 0;   // good + skipped rows of the current file
  int64_t rows_read_ = 0;
  int64_t rows_skipped_ = 0;
  std::string buffer_;
};

}  // namespace trlhpc::dataset
