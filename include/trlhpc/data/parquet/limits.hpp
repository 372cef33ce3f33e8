#pragma once
// Limits of trlhpc's Parquet reader (docs/UNTRUSTED_INPUT.md). A Parquet file from the Hub is untrusted:
// every length, count and offset in it is checked against the file and against these, so a crafted file
// ends in a UserError naming the file and the limit, never in a crash, a hang or a huge allocation.
// Each is far above what `datasets` / pyarrow write (pages of ~1 MiB, row groups of ~100 MB).
#include <cstdint>
#include <stdexcept>

namespace trlhpc::parquet {

inline constexpr int64_t kMaxParquetFooterBytes = 64ll << 20;     // the Thrift FileMetaData
inline constexpr int kMaxThriftNesting = 64;                       // structs/lists inside each other in Thrift
inline constexpr int64_t kMaxParquetPageBytes = 256ll << 20;       // one page, compressed or not
inline constexpr int64_t kMaxParquetPageValues = 1ll << 21;        // level entries of one page (pyarrow: <= 20,000 rows)
inline constexpr int64_t kMaxParquetDictionaryValues = 1ll << 20;  // entries of one dictionary (pyarrow: <= 1 MiB of them)
inline constexpr int kMaxParquetSchemaDepth = 32;                  // nesting of the schema (levels fit a byte)
inline constexpr int64_t kMaxParquetColumns = 10000;               // leaf columns
inline constexpr int64_t kMaxParquetRowValues = 1ll << 24;         // leaf values assembled into one row

// A file that breaks the format or a limit. Internal to the reader: ParquetRowReader turns it into a
// UserError naming the file, row group and column.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace trlhpc::parquet
