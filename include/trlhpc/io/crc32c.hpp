#pragma once
// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78; RFC 3720 appendix B.4), and the
// "masked" form TFRecord files store (TensorFlow's core/lib/hash/crc32c.h): a CRC of data that itself
// contains CRCs is weak, so the stored value is rotated right by 15 bits and offset by 0xa282ead8.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trlhpc {

uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

inline uint32_t masked_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace trlhpc
