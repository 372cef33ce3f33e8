#pragma once
// ProtobufMessage: the few protocol-buffer wire types an event file needs, encoded by hand so trlhpc
// carries no protobuf dependency (encoding as specified at protobuf.dev/programming-guides/encoding:
// a key is varint(field_number << 3 | wire_type); varint = 0, 64-bit = 1, length-delimited = 2,
// 32-bit = 5; fixed-width values are little-endian). Fields are appended in call order, which is
// what a reader accepts (any order is valid on the wire).
#include <cstdint>
#include <string>
#include <string_view>

namespace trlhpc {

class ProtobufMessage {
 public:
  ProtobufMessage& add_varint(int field, uint64_t value);        // int64 / uint64 / enum / bool
  ProtobufMessage& add_double(int field, double value);          // double (wire type 1)
  ProtobufMessage& add_float(int field, float value);            // float (wire type 5)
  ProtobufMessage& add_bytes(int field, std::string_view bytes); // string / bytes
  ProtobufMessage& add_message(int field, const ProtobufMessage& message);

  const std::string& bytes() const { return bytes_; }

 private:
  void put_key(int field, int wire_type);
  void put_varint(uint64_t value);
  void put_little_endian(uint64_t value, int size);
  std::string bytes_;
};

}  // namespace trlhpc
