// Parquet page codecs (see codec.hpp).
#include "trlhpc/data/parquet/codec.hpp"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <memory>

#include "trlhpc/data/parquet/limits.hpp"

namespace trlhpc::parquet {
namespace {

void gunzip(const uint8_t* src, size_t n, std::string& out) {
  z_stream z{};
  // 16 + MAX_WBITS: a gzip header (Parquet's GZIP is RFC 1952), +32 would also accept zlib.
  if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) throw FormatError("gzip: cannot initialise zlib");
  std::unique_ptr<z_stream, decltype(&inflateEnd)> guard(&z, inflateEnd);
  z.next_in = const_cast<Bytef*>(src);
  z.avail_in = static_cast<uInt>(n);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  if (rc != Z_STREAM_END || z.avail_out != 0) throw FormatError("gzip: corrupt page or wrong uncompressed size");
}

}  // namespace

const char* codec_name(int32_t codec) {
  switch (static_cast<Codec>(codec)) {
    case Codec::kUncompressed: return "UNCOMPRESSED";
    case Codec::kSnappy: return "SNAPPY";
    case Codec::kGzip: return "GZIP";
    case Codec::kLzo: return "LZO";
    case Codec::kBrotli: return "BROTLI";
    case Codec::kLz4: return "LZ4";
    case Codec::kZstd: return "ZSTD";
    case Codec::kLz4Raw: return "LZ4_RAW";
  }
  return "unknown";
}

void decompress(int32_t codec, const uint8_t* src, size_t src_size, size_t uncompressed_size, std::string& out) {
  if (uncompressed_size > static_cast<size_t>(kMaxParquetPageBytes))
    throw FormatError("a page of " + std::to_string(uncompressed_size) + " bytes is above kMaxParquetPageBytes (" +
                      std::to_string(kMaxParquetPageBytes) + ")");
  if (static_cast<Codec>(codec) == Codec::kUncompressed) {
    if (src_size != uncompressed_size) throw FormatError("an uncompressed page whose two sizes differ");
    out.assign(reinterpret_cast<const char*>(src), src_size);
    return;
  }
  out.resize(uncompressed_size);
  if (uncompressed_size == 0) return;  // e.g. the values of an all-null v2 page: nothing to inflate
  switch (static_cast<Codec>(codec)) {
    case Codec::kSnappy: {
      size_t n = 0;
      if (!snappy::GetUncompressedLength(reinterpret_cast<const char*>(src), src_size, &n) || n != uncompressed_size)
        throw FormatError("snappy: corrupt page or wrong uncompressed size");
      if (!snappy::RawUncompress(reinterpret_cast<const char*>(src), src_size, out.data()))
        throw FormatError("snappy: corrupt page");
      return;
    }
    case Codec::kGzip: gunzip(src, src_size, out); return;
    case Codec::kZstd: {
      const size_t n = ZSTD_decompress(out.data(), out.size(), src, src_size);
      if (ZSTD_isError(n) || n != uncompressed_size) throw FormatError("zstd: corrupt page or wrong uncompressed size");
      return;
    }
    default:
      throw FormatError(std::string("compression ") + codec_name(codec) +
                        " is not supported (trlhpc reads SNAPPY, GZIP, ZSTD and UNCOMPRESSED); rewrite the file, e.g. "
                        "pyarrow.parquet.write_table(table, path, compression='zstd')");
  }
}

}  // namespace trlhpc::parquet
