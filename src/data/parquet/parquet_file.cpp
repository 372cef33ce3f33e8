// Parquet file -> JSON rows (see parquet_file.hpp). File layout (parquet-format README):
//   "PAR1" | column chunks ... | FileMetaData (Thrift compact) | u32 footer length | "PAR1"
#include "trlhpc/data/parquet/parquet_file.hpp"

#include <cstring>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {
namespace {

constexpr char kMagic[4] = {'P', 'A', 'R', '1'};
constexpr const char* kWhatToDo =
    ". The file is damaged or uses a Parquet feature trlhpc does not read: re-export it with pyarrow "
    "(pyarrow.parquet.write_table(pyarrow.parquet.read_table(src), dst)) or convert it to JSON Lines";

}  // namespace

void ParquetFile::fail(const std::string& what, const std::string& column) const {
  std::string where = path_;
  if (next_group_ > 0) where += ": row group " + std::to_string(next_group_ - 1);
  if (!column.empty()) where += ", column " + column;
  throw UserError(where + ": " + what + kWhatToDo);
}

ParquetFile::ParquetFile(const std::string& path) : path_(path), file_(path) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(file_.data());
  const size_t size = file_.size();
  if (size < 12 || std::memcmp(bytes, kMagic, 4) != 0 || std::memcmp(bytes + size - 4, kMagic, 4) != 0)
    fail("not a Parquet file (no PAR1 magic at its start and end)");
  uint32_t footer = 0;
  std::memcpy(&footer, bytes + size - 8, 4);
  if (footer > size - 12) fail("its footer length " + std::to_string(footer) + " exceeds the file");
  if (footer > kMaxParquetFooterBytes)
    fail("a footer of " + std::to_string(footer) + " bytes, above kMaxParquetFooterBytes (" + std::to_string(kMaxParquetFooterBytes) + ")");
  try {
    metadata_ = parse_file_metadata(bytes + size - 8 - footer, footer);
    schema_ = build_schema(metadata_.schema);
  } catch (const FormatError& e) {
    fail(std::string("bad footer: ") + e.what());
  }
  int64_t total = 0;
  for (const auto& g : metadata_.row_groups) {
    if (g.num_rows < 0 || g.columns.size() != schema_.leaves.size())
      fail("a row group whose columns do not match the schema (" + std::to_string(g.columns.size()) + " chunks for " +
           std::to_string(schema_.leaves.size()) + " columns)");
    total += g.num_rows;
    if (total < 0 || total > (int64_t{1} << 48)) fail("row counts that overflow");
  }
}

ParquetFile::~ParquetFile() = default;

bool ParquetFile::open_row_group() {
  assembler_.reset();
  columns_.clear();
  while (next_group_ < metadata_.row_groups.size()) {
    const RowGroupMeta& g = metadata_.row_groups[next_group_++];
    if (g.num_rows == 0) continue;
    const auto* bytes = reinterpret_cast<const uint8_t*>(file_.data());
    columns_.reserve(g.columns.size());
    for (size_t i = 0; i < g.columns.size(); ++i) {
      try {
        columns_.emplace_back(bytes, file_.size(), g.columns[i], *schema_.leaves[i]);
      } catch (const FormatError& e) {
        fail(e.what(), schema_.leaves[i]->path);
      }
    }
    rows_left_in_group_ = g.num_rows;
    assembler_ = std::make_unique<RowAssembler>(schema_, columns_);
    return true;
  }
  return false;
}

bool ParquetFile::next(nlohmann::ordered_json& row) {
  try {
    while (rows_left_in_group_ == 0) {
      if (assembler_ && !assembler_->finished()) throw FormatError("its columns hold more rows than the row group's num_rows");
      if (!open_row_group()) return false;
    }
    if (assembler_->finished()) throw FormatError("its columns hold fewer rows than the row group's num_rows");
    row = assembler_->next_row();
  } catch (const FormatError& e) {
    fail(std::string("row ") + std::to_string(rows_read_ + 1) + ": " + e.what());
  }
  --rows_left_in_group_;
  ++rows_read_;
  return true;
}

}  // namespace trlhpc::parquet
