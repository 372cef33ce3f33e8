#pragma once
// The entries of one column chunk, one at a time: each entry is (repetition level, definition level)
// and, when the definition level is the column's maximum, a value. Pages are decoded lazily, one at a
// time, from the mapped file, so memory is one page (plus the chunk's dictionary) per column whatever
// the row group's size.
//
// Supported (what pyarrow and `datasets` write): data pages v1 and v2, dictionary pages, PLAIN and
// PLAIN_DICTIONARY / RLE_DICTIONARY values, RLE booleans, RLE levels; the codecs of codec.hpp. Others
// are a FormatError that names the encoding.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trlhpc/data/parquet/metadata.hpp"
#include "trlhpc/data/parquet/schema.hpp"

namespace trlhpc::parquet {

class ColumnCursor {
 public:
  // file: the whole mapped file (size bytes). The chunk's byte range is checked against it.
  ColumnCursor(const uint8_t* file, size_t size, const ColumnChunkMeta& meta, const SchemaNode& leaf);

  bool at_end();  // true once every entry of the chunk has been taken
  int rep();      // levels of the current entry (!at_end())
  int def();
  // Takes the current entry. When it holds a value and `value` is not null, stores it there.
  void take(nlohmann::ordered_json* value);

  const SchemaNode& leaf() const { return leaf_; }

 private:
  bool load_page();
  void read_dictionary(const PageHeader& h, const uint8_t* body);
  void start_data_page(const PageHeader& h, const uint8_t* body);
  nlohmann::ordered_json next_plain_value();

  const uint8_t* file_;
  const SchemaNode& leaf_;
  int32_t codec_;
  size_t pos_, end_;           // remaining page bytes of the chunk: [pos_, end_)
  int64_t entries_left_;       // entries the chunk still holds (its num_values)

  std::vector<nlohmann::ordered_json> dictionary_;
  bool has_dictionary_ = false;
  std::string page_;           // the current page's decompressed values (and v1 levels)
  std::vector<uint8_t> rep_, def_;  // (entries_) levels of the page
  size_t entry_ = 0, entries_ = 0;  // current entry in the page, entries in the page
  // Values: dictionary indices, or PLAIN bytes at page_[value_pos_, value_end_).
  bool dictionary_encoded_ = false;
  bool rle_booleans_ = false;
  std::vector<uint32_t> indices_;
  size_t next_index_ = 0;
  size_t value_pos_ = 0, value_end_ = 0;
  int bool_bit_ = 0;           // PLAIN booleans: bit of page_[value_pos_]
};

}  // namespace trlhpc::parquet
