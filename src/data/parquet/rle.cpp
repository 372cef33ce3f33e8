// RLE / bit-packed hybrid decoder (see rle.hpp).
#include "trlhpc/data/parquet/rle.hpp"

#include <algorithm>
#include <string>

#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {

int bit_width_of(uint32_t max_value) {
  int w = 0;
  while (max_value >> w) ++w;
  return w;
}

namespace {

template <class Value>
void decode(const uint8_t* data, size_t size, int bit_width, size_t count, std::vector<Value>& out) {
  if (bit_width < 0 || bit_width > static_cast<int>(8 * sizeof(Value))) throw FormatError("a bit width of " + std::to_string(bit_width) + " (at most " + std::to_string(8 * sizeof(Value)) + ")");
  out.resize(count);
  size_t filled = 0, pos = 0;
  const size_t value_bytes = (static_cast<size_t>(bit_width) + 7) / 8;
  while (filled < count) {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= size) throw FormatError("levels or indices end before all values were read");
      if (shift > 35) throw FormatError("a run header varint longer than 5 bytes");
      const uint8_t b = data[pos++];
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (header & 1) {
      const uint64_t values = (header >> 1) * 8;
      const uint64_t bytes = (header >> 1) * static_cast<uint64_t>(bit_width);
      if (bytes > size - pos) throw FormatError("a bit-packed run runs past the end of its data");
      const uint8_t* run = data + pos;
      const uint64_t take = values < count - filled ? values : count - filled;
      for (uint64_t i = 0; i < take; ++i) {
        uint64_t bit = i * static_cast<uint64_t>(bit_width), v = 0;
        for (int got = 0; got < bit_width;) {
          const uint64_t byte = bit >> 3;
          const int offset = static_cast<int>(bit & 7);
          const int n = std::min(8 - offset, bit_width - got);
          v |= static_cast<uint64_t>((run[byte] >> offset) & ((1u << n) - 1)) << got;
          got += n;
          bit += static_cast<uint64_t>(n);
        }
        out[filled++] = static_cast<Value>(v);
      }
      pos += bytes;
    } else {
      const uint64_t repeat = header >> 1;
      if (value_bytes > size - pos) throw FormatError("an RLE run runs past the end of its data");
      uint64_t v = 0;
      for (size_t i = 0; i < value_bytes; ++i) v |= static_cast<uint64_t>(data[pos + i]) << (8 * i);
      pos += value_bytes;
      if (bit_width < 32 && (v >> bit_width) != 0) throw FormatError("an RLE value wider than its bit width");
      if (repeat == 0) continue;  // legal but empty; the header byte itself guarantees progress
      const uint64_t take = repeat < count - filled ? repeat : count - filled;
      for (uint64_t i = 0; i < take; ++i) out[filled++] = static_cast<Value>(v);
    }
  }
}

}  // namespace

void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, size_t count, std::vector<uint32_t>& out) {
  decode(data, size, bit_width, count, out);
}

void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, size_t count, std::vector<uint8_t>& out) {
  decode(data, size, bit_width, count, out);
}

}  // namespace trlhpc::parquet
