// DatasetReader: rows of JSONL / JSON-array files, one at a time (see reader.hpp).
#include "trlhpc/data/dataset/reader.hpp"

#include <algorithm>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/parquet/parquet_file.hpp"

namespace trlhpc::dataset {
namespace {

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Line (relative to the start of `text`, 0-based) of byte offset `byte`, for errors inside a multi-line element.
int64_t lines_before(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  return std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte), '\n');
}

const char* json_type_name(const nlohmann::ordered_json& v) { return v.type_name(); }

// nlohmann's parser callback sees the depth of every value; refusing past kMaxRowNesting keeps later
// recursive walks of the row (and nlohmann's own dump) within the stack.
struct TooDeep {};
bool refuse_deep_nesting(int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json&) {
  if (depth > kMaxRowNesting &&
      (event == nlohmann::ordered_json::parse_event_t::object_start || event == nlohmann::ordered_json::parse_event_t::array_start))
    throw TooDeep{};
  return true;
}

}  // namespace

DatasetReader::DatasetReader(std::vector<std::string> files, DatasetReaderOptions options)
    : files_(std::move(files)), options_(options) {
  TRLHPC_REQUIRE(!files_.empty(), "no dataset file to read: pass --dataset_name with a .jsonl/.json file");
}

DatasetReader::DatasetReader(const std::vector<DatasetPart>& parts, DatasetReaderOptions options)
    : parts_(parts), options_(options) {
  for (size_t p = 0; p < parts_.size(); ++p)
    for (const std::string& f : parts_[p].files) {
      files_.push_back(f);
      part_of_file_.push_back(p);
    }
  TRLHPC_REQUIRE(!files_.empty(), "no dataset file to read: pass --dataset_name with a .jsonl/.json/.parquet file");
  column_seen_.assign(parts_.front().columns.size(), false);
}

DatasetReader::~DatasetReader() = default;

void DatasetReader::select_columns(DatasetRow& row) {
  const std::vector<std::string>& columns = parts_[current_part_].columns;
  if (columns.empty()) return;
  nlohmann::ordered_json kept = nlohmann::ordered_json::object();
  for (size_t c = 0; c < columns.size(); ++c) {
    auto it = row.value.find(columns[c]);
    if (it != row.value.end()) {
      kept[columns[c]] = std::move(*it);
      column_seen_[c] = true;
    } else {
      kept[columns[c]] = nullptr;
    }
  }
  row.value = std::move(kept);
}

// A selected column no row of the part had: datasets' select_columns refuses it the same way.
void DatasetReader::finish_part() {
  if (parts_.empty()) return;
  const DatasetPart& part = parts_[current_part_];
  for (size_t c = 0; c < part.columns.size(); ++c)
    TRLHPC_REQUIRE(column_seen_[c], part.origin + ": columns names \"" + part.columns[c] +
                                        "\", which no row of its files has; fix the columns: list");
}

bool DatasetReader::open_next_file() {
  if (next_file_ >= files_.size()) return false;
  current_file_ = files_[next_file_++];
  line_ = 0;
  rows_in_file_ = 0;
  entries_in_file_ = 0;
  scanner_.reset();
  parquet_.reset();
  if (ends_with(current_file_, ".parquet")) {
    kind_ = FileKind::kParquet;
    parquet_ = std::make_unique<parquet::ParquetFile>(current_file_);  // UserError naming the file when bad
    return true;
  }
  stream_ = std::ifstream(current_file_, std::ios::binary);
  TRLHPC_REQUIRE(stream_.is_open(), current_file_ + ": cannot open the dataset file (check the path and permissions)");
  line_ = 0;
  rows_in_file_ = 0;
  entries_in_file_ = 0;
  scanner_.reset();
  kind_ = FileKind::kJsonLines;
  if (!ends_with(current_file_, ".jsonl")) {
    // .json (or anything else): a JSON array when the first non-blank character is '[', else JSON Lines,
    // as `datasets` accepts both in .json files.
    auto* buf = stream_.rdbuf();
    std::string head;
    for (int c = buf->sgetc(); c != std::char_traits<char>::eof() && head.size() < 4096; c = buf->sgetc()) {
      head.push_back(static_cast<char>(buf->sbumpc()));
      if (!(c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0xEF || c == 0xBB || c == 0xBF)) break;
    }
    bool array = !head.empty() && head.back() == '[';
    stream_.seekg(0);
    if (array) {
      kind_ = FileKind::kJsonArray;
      scanner_ = std::make_unique<detail::JsonArrayElementScanner>(stream_, current_file_);
    }
  }
  return true;
}

void DatasetReader::finish_file() {
  TRLHPC_REQUIRE(entries_in_file_ > 0, current_file_ +
                                           ": the dataset file has no rows (it is empty, blank or an empty "
                                           "array). Remove it or point --dataset_name at the right data");
  stream_.close();
  parquet_.reset();
  current_file_.clear();
}

// Parses one row's text; true when it is a good row (stored in `row`), false when skipped.
bool DatasetReader::accept(const std::string& text, int64_t line, DatasetRow& row) {
  ++entries_in_file_;
  std::string problem;
  int64_t problem_line = line;
  try {
    row.value = nlohmann::ordered_json::parse(text, refuse_deep_nesting);
    if (!row.value.is_object())
      problem = std::string("the row is a JSON ") + json_type_name(row.value) +
                ", not an object like {\"messages\": [...]} or {\"text\": \"...\"}";
  } catch (const TooDeep&) {
    problem = "the row nests objects and arrays more than " + std::to_string(kMaxRowNesting) +
              " levels deep, trlhpc's limit (kMaxRowNesting)";
  } catch (const nlohmann::ordered_json::out_of_range& e) {
    // A number beyond double's range (1e999): nlohmann refuses it (Python would read inf).
    std::string detail = e.what();
    if (size_t tag_end = detail.find("] "); detail.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos)
      detail.erase(0, tag_end + 2);
    problem = "a value is out of range: " + detail;
  } catch (const nlohmann::ordered_json::parse_error& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep "parse error at line 1, column 9: ...".
    std::string detail = e.what();
    if (size_t tag_end = detail.find("] "); detail.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos)
      detail.erase(0, tag_end + 2);
    problem = "malformed JSON: " + detail;
    problem_line = line + lines_before(text, e.byte > 0 ? e.byte - 1 : 0);
  }
  if (problem.empty()) {
    row.parquet = false;
    row.file = current_file_;
    row.line = line;
    ++rows_in_file_;
    ++rows_read_;
    return true;
  }
  TRLHPC_REQUIRE(options_.skip_bad_rows, current_file_ + ":" + std::to_string(problem_line) + ": " + problem +
                                             ". Fix the row, or pass --skip_bad_rows to skip and count such rows");
  ++rows_skipped_;
  return false;
}

bool DatasetReader::next_in_file(DatasetRow& row) {
  if (kind_ == FileKind::kParquet) {
    // Rows of a Parquet file are objects by construction (the schema's root is a struct).
    if (!parquet_->next(row.value)) return false;
    row.file = current_file_;
    row.line = parquet_->rows_read();
    row.parquet = true;
    ++entries_in_file_;
    ++rows_in_file_;
    ++rows_read_;
    return true;
  }
  if (kind_ == FileKind::kJsonArray) {
    int64_t line = 0;
    while (scanner_->next(buffer_, line))
      if (accept(buffer_, line, row)) return true;
    return false;
  }
  while (std::getline(stream_, buffer_)) {
    ++line_;
    if (line_ == 1 && buffer_.rfind("\xEF\xBB\xBF", 0) == 0) buffer_.erase(0, 3);  // UTF-8 byte order mark
    if (blank(buffer_)) continue;
    if (accept(buffer_, line_, row)) return true;
  }
  TRLHPC_REQUIRE(!stream_.bad(), current_file_ + ":" + std::to_string(line_) + ": read error (I/O failure)");
  return false;
}

bool DatasetReader::next(DatasetRow& row) {
  for (;;) {
    if (current_file_.empty()) {
      const size_t part = next_file_ < part_of_file_.size() ? part_of_file_[next_file_] : parts_.size();
      if (!parts_.empty() && part != current_part_) {
        finish_part();
        current_part_ = part;
        if (part < parts_.size()) column_seen_.assign(parts_[part].columns.size(), false);
      }
      if (!open_next_file()) {
        return false;
      }
    }
    if (next_in_file(row)) {
      row.index = rows_read_ - 1;
      if (!parts_.empty()) select_columns(row);
      return true;
    }
    finish_file();
  }
}

}  // namespace trlhpc::dataset
