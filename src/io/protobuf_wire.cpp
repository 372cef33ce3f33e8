#include "trlhpc/io/protobuf_wire.hpp"

#include <cstring>

namespace trlhpc {

void ProtobufMessage::put_varint(uint64_t value) {
  while (value >= 0x80) {
    bytes_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  bytes_.push_back(static_cast<char>(value));
}

void ProtobufMessage::put_key(int field, int wire_type) {
  put_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtobufMessage::put_little_endian(uint64_t value, int size) {
  for (int i = 0; i < size; ++i) bytes_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

ProtobufMessage& ProtobufMessage::add_varint(int field, uint64_t value) {
  put_key(field, 0);
  put_varint(value);
  return *this;
}

ProtobufMessage& ProtobufMessage::add_double(int field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(field, 1);
  put_little_endian(bits, 8);
  return *this;
}

ProtobufMessage& ProtobufMessage::add_float(int field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(field, 5);
  put_little_endian(bits, 4);
  return *this;
}

ProtobufMessage& ProtobufMessage::add_bytes(int field, std::string_view bytes) {
  put_key(field, 2);
  put_varint(bytes.size());
  bytes_.append(bytes);
  return *this;
}

ProtobufMessage& ProtobufMessage::add_message(int field, const ProtobufMessage& message) {
  return add_bytes(field, message.bytes());
}

}  // namespace trlhpc
