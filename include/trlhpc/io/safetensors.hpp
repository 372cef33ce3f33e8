#pragma once
// The safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data section]
//   header = {"__metadata__": {str: str} (optional),
//             "<name>": {"dtype": "F32"|"BF16"|..., "shape": [..], "data_offsets": [begin, end]}, ...}
//   offsets are bytes relative to the start of the data section; the tensors tile it exactly
//   (contiguous, non-overlapping, ending at the end of the file); data is little-endian, row-major.
//
// SafetensorsReader maps the file and validates all of that up front, so a truncated or corrupt file
// fails with a UserError that names the file and the problem before any rank starts computing.
// Reads convert to fp32 and can take a slice [begin, end) of a tensor's flat elements, so a rank
// touches only the pages of its shard.
//
// SafetensorsWriter streams fp32 data into an F32 or BF16 file (header padded with spaces to a multiple
// of 8 bytes, as the reference writer does) under `<path>.tmp`, and renames it over `path` only when
// complete: no half-written file ever carries the final name.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/core/tensor.hpp"
#include "trlhpc/io/mapped_file.hpp"

namespace trlhpc {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;        // safetensors spelling: "F32", "BF16", "F16", "F64", "I32", "I64", "U8", ...
  size_t element_size = 0;  // bytes per element
  Shape shape;
  uint64_t data_begin = 0;  // byte offsets into the data section
  uint64_t data_end = 0;

  int64_t numel() const { return shape_numel(shape); }
};

class SafetensorsReader {
 public:
  // Maps and validates `path`; UserError naming the file and the problem when it is not a valid file.
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // All tensors in data-offset order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // UserError naming the file and the tensor when absent.
  const SafetensorsTensorInfo& info(const std::string& name) const;
  // The "__metadata__" strings (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Raw little-endian bytes of a tensor, as stored.
  std::span<const std::byte> bytes(const std::string& name) const;
  // Flat elements [begin, end) of a tensor converted to fp32 into out[0 .. end-begin). Readable dtypes:
  // F32, BF16, F16, F64, I32, I64 (others -> UserError). 0 <= begin <= end <= numel.
  void read_f32(const std::string& name, int64_t begin, int64_t end, float* out) const;
  // The whole tensor as fp32.
  std::vector<float> read_f32(const std::string& name) const;

 private:
  void parse_header();

  MappedFile file_;
  const std::byte* data_section_ = nullptr;
  uint64_t data_size_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A tensor the writer will hold: name and shape; its data is appended later, in order.
struct SafetensorsEntry {
  std::string name;
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Plans a file of `entries` (in this order) stored as `dtype` (F32 or BF16) and writes the header to
  // `<path>.tmp`. Metadata defaults to {"format": "pt"}, which transformers expects.
  SafetensorsWriter(std::string path, std::vector<SafetensorsEntry> entries, DType dtype,
                    std::map<std::string, std::string> metadata = {{"format", "pt"}});
  // Removes `<path>.tmp` if finish() did not complete.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends the next `count` fp32 elements of the tensors' concatenated flat data (any chunking: one
  // whole tensor, a part of one, or several at once), converting to the file dtype.
  void append(const float* data, int64_t count);
  // Checks every element was appended, flushes, fsyncs and renames `<path>.tmp` to `path`.
  void finish();

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const;
  };
  std::string path_, temp_path_;
  DType dtype_;
  int64_t total_elements_ = 0, written_elements_ = 0;
  std::unique_ptr<std::FILE, FileCloser> file_;
  bool finished_ = false;
};

// One-call writer for tensors already in memory.
struct SafetensorsTensorRef {
  std::string name;
  Shape shape;
  const float* data;  // shape_numel(shape) floats
};
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorRef>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace trlhpc
