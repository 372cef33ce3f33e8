// Page-by-page decoding of one Parquet column chunk (see column_cursor.hpp; formats from parquet-format
// README "Data Pages" and Encodings.md).
#include "trlhpc/data/parquet/column_cursor.hpp"

#include <cstring>

#include "src/data/tokenizer/utf8.hpp"
#include "trlhpc/data/parquet/codec.hpp"
#include "trlhpc/data/parquet/limits.hpp"
#include "trlhpc/data/parquet/rle.hpp"

namespace trlhpc::parquet {
namespace {

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian host (the dataset cache asserts it too)
}

const char* encoding_name(int32_t e) {
  switch (static_cast<Encoding>(e)) {
    case Encoding::kPlain: return "PLAIN";
    case Encoding::kPlainDictionary: return "PLAIN_DICTIONARY";
    case Encoding::kRle: return "RLE";
    case Encoding::kBitPacked: return "BIT_PACKED";
    case Encoding::kDeltaBinaryPacked: return "DELTA_BINARY_PACKED";
    case Encoding::kDeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::kDeltaByteArray: return "DELTA_BYTE_ARRAY";
    case Encoding::kRleDictionary: return "RLE_DICTIONARY";
    case Encoding::kByteStreamSplit: return "BYTE_STREAM_SPLIT";
  }
  return "unknown";
}

[[noreturn]] void unsupported_encoding(int32_t e) {
  throw FormatError(std::string("values encoded as ") + encoding_name(e) + " (" + std::to_string(e) +
                    ") are not supported (trlhpc reads PLAIN and dictionary encodings, pyarrow's defaults); "
                    "rewrite the file with pyarrow.parquet.write_table(table, path, use_dictionary=True)");
}

// Decodes one RLE-hybrid level block of `count` entries (a no-op list of zeros when max_level is 0).
void decode_levels(const uint8_t* p, size_t n, int max_level, size_t count, std::vector<uint8_t>& out) {
  if (max_level == 0) {
    out.assign(count, 0);
    return;
  }
  decode_rle_hybrid(p, n, bit_width_of(static_cast<uint32_t>(max_level)), count, out);
  for (uint8_t v : out)
    if (v > max_level) throw FormatError("a level above the column's maximum");
}

}  // namespace

ColumnCursor::ColumnCursor(const uint8_t* file, size_t size, const ColumnChunkMeta& meta, const SchemaNode& leaf)
    : file_(file), leaf_(leaf), codec_(meta.codec), entries_left_(meta.num_values) {
  if (meta.type != leaf.physical_type) throw FormatError("its chunk's type differs from the schema's");
  if (!meta.file_path.empty()) throw FormatError("its data is in another file (" + meta.file_path + "), which trlhpc does not follow");
  int64_t start = meta.data_page_offset;
  if (meta.dictionary_page_offset > 0 && meta.dictionary_page_offset < start) start = meta.dictionary_page_offset;
  // Parquet files start with the 4-byte magic "PAR1": no page can begin before it.
  if (start < 4 || meta.total_compressed_size < 0 || meta.num_values < 0 ||
      static_cast<uint64_t>(start) > size || static_cast<uint64_t>(meta.total_compressed_size) > size - static_cast<uint64_t>(start))
    throw FormatError("its chunk's byte range lies outside the file");
  pos_ = static_cast<size_t>(start);
  end_ = pos_ + static_cast<size_t>(meta.total_compressed_size);
}

bool ColumnCursor::load_page() {
  while (entries_left_ > 0) {
    if (pos_ >= end_) throw FormatError("its chunk ends before the " + std::to_string(entries_left_) + " entries it still owes");
    size_t header_bytes = 0;
    const PageHeader h = parse_page_header(file_ + pos_, end_ - pos_, &header_bytes);
    pos_ += header_bytes;
    if (h.compressed_size < 0 || h.uncompressed_size < 0 || static_cast<size_t>(h.compressed_size) > end_ - pos_)
      throw FormatError("a page runs past the end of its chunk");
    if (h.compressed_size > kMaxParquetPageBytes || h.uncompressed_size > kMaxParquetPageBytes)
      throw FormatError("a page above kMaxParquetPageBytes (" + std::to_string(kMaxParquetPageBytes) + " bytes)");
    const uint8_t* body = file_ + pos_;
    pos_ += static_cast<size_t>(h.compressed_size);
    if (h.type == static_cast<int32_t>(PageType::kDictionaryPage)) {
      if (!h.has_dictionary_header) throw FormatError("a dictionary page without its header");
      read_dictionary(h, body);
      continue;
    }
    if (h.type == static_cast<int32_t>(PageType::kDataPage) || h.type == static_cast<int32_t>(PageType::kDataPageV2)) {
      start_data_page(h, body);
      if (entries_ > 0) return true;
      continue;
    }
    // Index pages (and unknown kinds) carry no entries.
  }
  return false;
}

void ColumnCursor::read_dictionary(const PageHeader& h, const uint8_t* body) {
  if (has_dictionary_) throw FormatError("a second dictionary page in one chunk");
  if (h.encoding != static_cast<int32_t>(Encoding::kPlain) && h.encoding != static_cast<int32_t>(Encoding::kPlainDictionary))
    unsupported_encoding(h.encoding);
  if (h.num_values < 0 || h.num_values > kMaxParquetDictionaryValues)
    throw FormatError("a dictionary of " + std::to_string(h.num_values) + " entries (kMaxParquetDictionaryValues " +
                      std::to_string(kMaxParquetDictionaryValues) + ")");
  decompress(codec_, body, static_cast<size_t>(h.compressed_size), static_cast<size_t>(h.uncompressed_size), page_);
  value_pos_ = 0;
  value_end_ = page_.size();
  bool_bit_ = 0;
  dictionary_.clear();
  for (int32_t i = 0; i < h.num_values; ++i) dictionary_.push_back(next_plain_value());
  has_dictionary_ = true;
}

void ColumnCursor::start_data_page(const PageHeader& h, const uint8_t* body) {
  const bool v2 = h.type == static_cast<int32_t>(PageType::kDataPageV2);
  if (v2 ? !h.has_v2_header : !h.has_data_header) throw FormatError("a data page without its header");
  if (h.num_values < 0 || h.num_values > kMaxParquetPageValues)
    throw FormatError("a page of " + std::to_string(h.num_values) + " entries (kMaxParquetPageValues " +
                      std::to_string(kMaxParquetPageValues) + ")");
  if (h.num_values > entries_left_) throw FormatError("pages hold more entries than the chunk's num_values");
  entries_ = static_cast<size_t>(h.num_values);
  entry_ = 0;
  size_t values_at = 0;
  if (v2) {
    // v2: levels first, never compressed, lengths in the header; then the (maybe compressed) values.
    if (h.rep_levels_byte_length < 0 || h.def_levels_byte_length < 0 ||
        static_cast<int64_t>(h.rep_levels_byte_length) + h.def_levels_byte_length > h.compressed_size ||
        static_cast<int64_t>(h.rep_levels_byte_length) + h.def_levels_byte_length > h.uncompressed_size)
      throw FormatError("a v2 page whose level lengths exceed the page");
    const size_t rep_n = static_cast<size_t>(h.rep_levels_byte_length), def_n = static_cast<size_t>(h.def_levels_byte_length);
    decode_levels(body, rep_n, leaf_.max_rep, entries_, rep_);
    decode_levels(body + rep_n, def_n, leaf_.max_def, entries_, def_);
    const size_t levels = rep_n + def_n;
    const size_t compressed = static_cast<size_t>(h.compressed_size) - levels;
    const size_t uncompressed = static_cast<size_t>(h.uncompressed_size) - levels;
    decompress(h.v2_is_compressed ? codec_ : static_cast<int32_t>(Codec::kUncompressed), body + levels, compressed, uncompressed, page_);
  } else {
    decompress(codec_, body, static_cast<size_t>(h.compressed_size), static_cast<size_t>(h.uncompressed_size), page_);
    const auto* p = reinterpret_cast<const uint8_t*>(page_.data());
    size_t at = 0;
    auto block = [&](int max_level, std::vector<uint8_t>& out) {
      if (max_level == 0) {
        out.assign(entries_, 0);
        return;
      }
      if (page_.size() - at < 4) throw FormatError("a page too short for its levels");
      const size_t n = read_u32(p + at);
      at += 4;
      if (n > page_.size() - at) throw FormatError("levels run past the end of their page");
      decode_levels(p + at, n, max_level, entries_, out);
      at += n;
    };
    block(leaf_.max_rep, rep_);
    block(leaf_.max_def, def_);
    values_at = at;
  }
  size_t present = 0;
  for (uint8_t d : def_) present += d == leaf_.max_def;
  const auto* values = reinterpret_cast<const uint8_t*>(page_.data()) + values_at;
  const size_t values_size = page_.size() - values_at;
  dictionary_encoded_ = h.encoding == static_cast<int32_t>(Encoding::kPlainDictionary) ||
                        h.encoding == static_cast<int32_t>(Encoding::kRleDictionary);
  rle_booleans_ = false;
  next_index_ = 0;
  if (dictionary_encoded_) {
    if (!has_dictionary_) throw FormatError("dictionary-encoded values without a dictionary page");
    if (present > 0) {
      if (values_size < 1) throw FormatError("dictionary indices without their bit width");
      decode_rle_hybrid(values + 1, values_size - 1, values[0], present, indices_);
      for (uint32_t i : indices_)
        if (i >= dictionary_.size()) throw FormatError("a dictionary index past the dictionary's end");
    }
  } else if (h.encoding == static_cast<int32_t>(Encoding::kRle) && leaf_.physical_type == static_cast<int32_t>(PhysicalType::kBoolean)) {
    rle_booleans_ = true;
    if (present > 0) {
      if (values_size < 4 || read_u32(values) > values_size - 4) throw FormatError("RLE booleans run past their page");
      decode_rle_hybrid(values + 4, read_u32(values), 1, present, indices_);
    }
  } else if (h.encoding != static_cast<int32_t>(Encoding::kPlain)) {
    unsupported_encoding(h.encoding);
  }
  value_pos_ = values_at;
  value_end_ = page_.size();
  bool_bit_ = 0;
  entries_left_ -= h.num_values;
}

nlohmann::ordered_json ColumnCursor::next_plain_value() {
  const auto* p = reinterpret_cast<const uint8_t*>(page_.data());
  const size_t left = value_end_ - value_pos_;
  auto need = [&](size_t n) {
    if (n > left) throw FormatError("PLAIN values run past the end of their page");
  };
  // A little-endian fixed-width value (the PLAIN encoding of INT32, INT64, FLOAT and DOUBLE).
  auto fixed = [&](auto type_tag) {
    using T = decltype(type_tag);
    need(sizeof(T));
    T v;
    std::memcpy(&v, p + value_pos_, sizeof(T));
    value_pos_ += sizeof(T);
    return v;
  };
  switch (static_cast<PhysicalType>(leaf_.physical_type)) {
    case PhysicalType::kBoolean: {
      need(1);
      const bool v = (p[value_pos_] >> bool_bit_) & 1;
      if (++bool_bit_ == 8) {
        bool_bit_ = 0;
        ++value_pos_;
      }
      return v;
    }
    case PhysicalType::kInt32: return fixed(int32_t{});
    case PhysicalType::kInt64: return fixed(int64_t{});
    case PhysicalType::kFloat: return static_cast<double>(fixed(float{}));
    case PhysicalType::kDouble: return fixed(double{});
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      size_t n = static_cast<size_t>(leaf_.type_length);
      if (leaf_.physical_type == static_cast<int32_t>(PhysicalType::kByteArray)) {
        need(4);
        n = read_u32(p + value_pos_);
        value_pos_ += 4;
      }
      if (n > value_end_ - value_pos_) throw FormatError("a string runs past the end of its page");
      std::string s(page_.data() + value_pos_, n);
      value_pos_ += n;
      // Text reaches chat templates, tokenizers and JSON output: it must be UTF-8, as pyarrow requires.
      if (!tokenizer::detail::is_valid_utf8(s)) throw FormatError("a string that is not valid UTF-8");
      return s;
    }
    default: throw FormatError("INT96 values (legacy timestamps) are not supported");
  }
}

bool ColumnCursor::at_end() {
  if (entry_ < entries_) return false;
  try {
    return !load_page();
  } catch (const FormatError& e) {
    throw FormatError("column " + leaf_.path + ": " + e.what());
  }
}

int ColumnCursor::rep() { return static_cast<int>(rep_[entry_]); }
int ColumnCursor::def() { return static_cast<int>(def_[entry_]); }

void ColumnCursor::take(nlohmann::ordered_json* value) {
  const bool present = def_[entry_] == leaf_.max_def;
  ++entry_;
  if (!present) return;
  if (dictionary_encoded_) {
    const uint32_t i = indices_[next_index_++];
    if (value) *value = dictionary_[i];
  } else if (rle_booleans_) {
    const bool b = indices_[next_index_++] != 0;
    if (value) *value = b;
  } else if (value) {
    *value = next_plain_value();
  } else {
    (void)next_plain_value();
  }
}

}  // namespace trlhpc::parquet
