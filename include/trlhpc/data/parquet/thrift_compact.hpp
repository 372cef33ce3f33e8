#pragma once
// A reader of the Thrift compact protocol, the encoding of Parquet's footer (FileMetaData) and page
// headers (Apache Thrift, doc/specs/thrift-compact-protocol.md). Only what Parquet's structs use: field
// headers with id deltas, zigzag varints, binary, lists, nested structs; anything else is skipped by type.
// Every read is bounds-checked; a truncated or malformed stream throws ThriftError (the caller turns it
// into a UserError naming the file).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {

using ThriftError = FormatError;

// Compact-protocol type ids of field headers and list elements.
enum class ThriftType : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12,
};

class ThriftReader {
 public:
  ThriftReader(const uint8_t* data, size_t size) : p_(data), end_(data + size), begin_(data) {}

  // Struct traversal:  begin_struct(); while (next_field(id, type)) { ...read or skip(type)...; } end_struct();
  void begin_struct();
  bool next_field(int16_t& id, ThriftType& type);  // false at the stop byte
  void end_struct();

  // A list header: element type and count (count checked against the bytes left).
  void begin_list(ThriftType& element_type, int64_t& count);
  void end_list() { --depth_; }

  bool read_bool(ThriftType field_type);  // a bool field: the value is in its header type
  int32_t read_i32();
  int64_t read_i64();
  std::string read_binary();
  void skip(ThriftType type);

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  uint64_t read_varint();
  uint8_t read_byte();
  void enter();

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  int depth_ = 0;
  int16_t last_field_[72] = {};  // field id of each open struct (delta encoding), by depth
};

}  // namespace trlhpc::parquet
