#pragma once
// The rows of a Parquet file as JSON objects, one at a time: what `datasets` gives for a Hub dataset's
// data/train-00000-of-00001.parquet (Arrow's to_pylist), e.g. a list<struct<content: string, role:
// string>> column as [{"content": ..., "role": ...}, ...]. Memory stays at one page per column.
//
//   ParquetFile file("data/train-00000-of-00001.parquet");
//   nlohmann::ordered_json row;
//   while (file.next(row)) use(row, file.rows_read());
//
// Any malformed byte, unsupported feature or limit (parquet/limits.hpp) is a UserError
//   "<file>: row group 2, column messages.list.element.content: <what>. <what to do>"
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trlhpc/data/parquet/column_cursor.hpp"
#include "trlhpc/data/parquet/metadata.hpp"
#include "trlhpc/data/parquet/row_assembler.hpp"
#include "trlhpc/data/parquet/schema.hpp"
#include "trlhpc/io/mapped_file.hpp"

namespace trlhpc::parquet {

class ParquetFile {
 public:
  explicit ParquetFile(const std::string& path);
  ~ParquetFile();
  ParquetFile(const ParquetFile&) = delete;
  ParquetFile& operator=(const ParquetFile&) = delete;

  bool next(nlohmann::ordered_json& row);  // false after the last row
  int64_t rows_read() const { return rows_read_; }  // 1-based number of the row last returned
  int64_t num_rows() const { return metadata_.num_rows; }
  const Schema& schema() const { return schema_; }

 private:
  bool open_row_group();
  [[noreturn]] void fail(const std::string& what, const std::string& column = "") const;

  std::string path_;
  MappedFile file_;
  FileMetaData metadata_;
  Schema schema_;
  size_t next_group_ = 0;
  int64_t rows_left_in_group_ = 0;
  std::vector<ColumnCursor> columns_;
  std::unique_ptr<RowAssembler> assembler_;
  int64_t rows_read_ = 0;
};

}  // namespace trlhpc::parquet
