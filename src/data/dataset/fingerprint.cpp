#include "trlhpc/data/dataset/fingerprint.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>

#include "trlhpc/core/splitmix64.hpp"

namespace trlhpc::dataset {
namespace {

// Word-at-a-time multiply-xorshift over length-framed fields (so [1,2][3] and [1][2,3] differ), with
// splitmix64's finaliser at the end.
class Digest {
 public:
  void u64(uint64_t w) {
    h_ = (h_ ^ w) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
  }
  template <class T>
  void field(std::span<const T> values) {
    u64(values.size());
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    const size_t n = values.size_bytes();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, bytes + i, 8);
      u64(w);
    }
    uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, bytes + i, n - i);
    u64(tail);
  }
  uint64_t value() const {
    return splitmix64(h_);
  }

 private:
  uint64_t h_ = 0x243f6a8885a308d3ull;
};

}  // namespace

std::string dataset_fingerprint(const SftDataset& dataset) {
  Digest d;
  d.u64(dataset.examples().size());
  for (const TokenizedExample& ex : dataset.examples()) {
    d.field(std::span<const int32_t>(ex.input_ids));
    d.field(std::span<const uint8_t>(ex.loss_mask));
  }
  d.u64(dataset.rows().size());
  for (const batching::PackedRow& row : dataset.rows()) {
    d.u64(row.segments.size() * 2 + (row.one_document ? 1 : 0));
    for (const batching::PackedSegment& s : row.segments) {
      d.u64(static_cast<uint64_t>(s.example));
      d.u64(static_cast<uint64_t>(static_cast<uint32_t>(s.start)) << 32 | static_cast<uint32_t>(s.length));
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(d.value()));
  return hex;
}

}  // namespace trlhpc::dataset
