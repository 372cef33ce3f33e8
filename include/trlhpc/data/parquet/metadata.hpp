#pragma once
// The parts of Parquet's Thrift structs (apache/parquet-format, src/main/thrift/parquet.thrift) a
// dataset reader needs: the flattened schema, the row groups and their column chunks, page headers.
// Field ids and enum values below are the ones parquet.thrift assigns.
#include <cstdint>
#include <string>
#include <vector>

#include "trlhpc/data/parquet/thrift_compact.hpp"

namespace trlhpc::parquet {

enum class PhysicalType : int32_t {
  kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6, kFixedLenByteArray = 7,
};
enum class Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum class Codec : int32_t { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
enum class Encoding : int32_t {
  kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5, kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9,
};
enum class PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

// parquet.thrift ConvertedType values that matter here.
inline constexpr int32_t kConvertedUtf8 = 0, kConvertedMap = 1, kConvertedMapKeyValue = 2, kConvertedList = 3;

struct SchemaElement {
  int32_t type = -1;         // PhysicalType, -1 for groups
  int32_t type_length = 0;
  int32_t repetition = 0;    // Repetition (the root has none: required)
  std::string name;
  int32_t num_children = 0;
  int32_t converted_type = -1;
  bool logical_string = false;  // LogicalType STRING (or ENUM / JSON: text too)
  bool logical_list = false;
  bool logical_map = false;
};

struct ColumnChunkMeta {
  int32_t type = -1;
  std::vector<std::string> path;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;
  std::string file_path;  // set when the chunk lives in another file (unsupported)
};

struct RowGroupMeta {
  std::vector<ColumnChunkMeta> columns;
  int64_t num_rows = 0;
};

struct FileMetaData {
  std::vector<SchemaElement> schema;  // depth-first, root first
  int64_t num_rows = 0;
  std::vector<RowGroupMeta> row_groups;
};

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  // DataPageHeader / DataPageHeaderV2 / DictionaryPageHeader, whichever the page has.
  int32_t num_values = 0;
  int32_t encoding = 0;
  int32_t num_rows = 0;               // v2
  int32_t def_levels_byte_length = 0; // v2
  int32_t rep_levels_byte_length = 0; // v2
  bool v2_is_compressed = true;       // v2
  bool has_data_header = false, has_v2_header = false, has_dictionary_header = false;
};

// Throws ThriftError on malformed bytes.
FileMetaData parse_file_metadata(const uint8_t* data, size_t size);
// Parses the header at data; *header_bytes = its length.
PageHeader parse_page_header(const uint8_t* data, size_t size, size_t* header_bytes);

}  // namespace trlhpc::parquet
