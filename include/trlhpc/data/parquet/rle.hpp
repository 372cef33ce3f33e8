#pragma once
// Parquet's RLE / bit-packing hybrid (parquet-format Encodings.md, "Run Length Encoding / Bit-Packing
// Hybrid"), used for definition and repetition levels and dictionary indices:
//   run := varint header; header & 1 ? bit-packed: (header >> 1) groups of 8 values, `bit_width` bits
//          each, LSB first : RLE: (header >> 1) copies of one value stored in ceil(bit_width / 8) bytes.
// decode_rle_hybrid appends exactly `count` values (a stream that ends early is an error; the last
// bit-packed group may be padded, so extra values are dropped). Output is bounded by `count`, which
// the caller has checked against kMaxParquetPageValues, so a 2-byte run claiming 2^31 values is harmless.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trlhpc::parquet {

// Values go to out (resized to `count`); each must be < 2^bit_width <= 2^32. FormatError otherwise.
void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, size_t count, std::vector<uint32_t>& out);
// Levels (bit_width <= 8): a byte each, as a level never exceeds the schema depth.
void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, size_t count, std::vector<uint8_t>& out);

// Bits needed for values 0..max_value (0 for max_value 0).
int bit_width_of(uint32_t max_value);

}  // namespace trlhpc::parquet
