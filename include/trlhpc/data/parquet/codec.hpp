#pragma once
// Page decompression for the codecs Hub datasets use: uncompressed, snappy (pyarrow's and `datasets`'
// default), gzip, zstd. Through Debian's libsnappy, zlib and libzstd. The output size is the page
// header's uncompressed size, checked against kMaxParquetPageBytes before anything is allocated, and the
// codec must produce exactly that many bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "trlhpc/data/parquet/metadata.hpp"

namespace trlhpc::parquet {

// FormatError on an unsupported codec, corrupt data or a size mismatch.
void decompress(int32_t codec, const uint8_t* src, size_t src_size, size_t uncompressed_size, std::string& out);

const char* codec_name(int32_t codec);

}  // namespace trlhpc::parquet
