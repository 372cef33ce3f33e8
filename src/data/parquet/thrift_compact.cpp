// Thrift compact protocol reader (see thrift_compact.hpp).
#include "trlhpc/data/parquet/thrift_compact.hpp"

#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {

uint8_t ThriftReader::read_byte() {
  if (p_ >= end_) throw ThriftError("truncated Thrift data");
  return *p_++;
}

uint64_t ThriftReader::read_varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    const uint8_t b = read_byte();
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return value;
  }
  throw ThriftError("a Thrift varint longer than 10 bytes");
}

void ThriftReader::enter() {
  if (++depth_ > kMaxThriftNesting)
    throw ThriftError("Thrift structs nest deeper than " + std::to_string(kMaxThriftNesting) + " (kMaxThriftNesting)");
}

void ThriftReader::begin_struct() {
  enter();
  last_field_[depth_] = 0;
}

void ThriftReader::end_struct() { --depth_; }

bool ThriftReader::next_field(int16_t& id, ThriftType& type) {
  const uint8_t header = read_byte();
  if (header == 0) return false;
  const uint8_t t = header & 0x0f;
  if (t > static_cast<uint8_t>(ThriftType::kStruct)) throw ThriftError("unknown Thrift type " + std::to_string(t));
  type = static_cast<ThriftType>(t);
  const int delta = header >> 4;
  if (delta != 0) {
    id = static_cast<int16_t>(last_field_[depth_] + delta);
  } else {
    const uint64_t z = read_varint();
    id = static_cast<int16_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  last_field_[depth_] = id;
  return true;
}

void ThriftReader::begin_list(ThriftType& element_type, int64_t& count) {
  enter();
  const uint8_t header = read_byte();
  element_type = static_cast<ThriftType>(header & 0x0f);
  uint64_t n = header >> 4;
  if (n == 15) n = read_varint();
  // Every element takes at least one byte, so a count above the bytes left is a lie.
  if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a Thrift list claims more elements than bytes left");
  count = static_cast<int64_t>(n);
}

bool ThriftReader::read_bool(ThriftType field_type) {
  if (field_type == ThriftType::kTrue) return true;
  if (field_type == ThriftType::kFalse) return false;
  return read_byte() == 1;  // inside a list a bool is one byte
}

int32_t ThriftReader::read_i32() {
  const uint64_t z = read_varint();
  return static_cast<int32_t>(static_cast<uint32_t>(z >> 1) ^ (~static_cast<uint32_t>(z & 1) + 1));
}

int64_t ThriftReader::read_i64() {
  const uint64_t z = read_varint();
  return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

std::string ThriftReader::read_binary() {
  const uint64_t n = read_varint();
  if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a Thrift string runs past the end of its data");
  std::string s(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return s;
}

void ThriftReader::skip(ThriftType type) {
  switch (type) {
    case ThriftType::kTrue:
    case ThriftType::kFalse: return;
    case ThriftType::kByte: read_byte(); return;
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64: read_varint(); return;
    case ThriftType::kDouble:
      if (end_ - p_ < 8) throw ThriftError("truncated Thrift double");
      p_ += 8;
      return;
    case ThriftType::kBinary: (void)read_binary(); return;
    case ThriftType::kList:
    case ThriftType::kSet: {
      ThriftType element;
      int64_t n;
      begin_list(element, n);
      for (int64_t i = 0; i < n; ++i) {
        if (element == ThriftType::kTrue || element == ThriftType::kFalse) read_byte();
        else skip(element);
      }
      end_list();
      return;
    }
    case ThriftType::kMap: {
      enter();
      const uint64_t n = read_varint();
      if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a Thrift map claims more entries than bytes left");
      if (n > 0) {
        const uint8_t kv = read_byte();
        for (uint64_t i = 0; i < n; ++i) {
          skip(static_cast<ThriftType>(kv >> 4));
          skip(static_cast<ThriftType>(kv & 0x0f));
        }
      }
      --depth_;
      return;
    }
    case ThriftType::kStruct: {
      begin_struct();
      int16_t id;
      ThriftType t;
      while (next_field(id, t)) skip(t);
      end_struct();
      return;
    }
    default: throw ThriftError("cannot skip Thrift type " + std::to_string(static_cast<int>(type)));
  }
}

}  // namespace trlhpc::parquet
