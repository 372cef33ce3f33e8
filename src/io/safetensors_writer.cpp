// SafetensorsWriter and write_safetensors (declared in safetensors.hpp).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/safetensors.hpp"

namespace trlhpc {
namespace {

[[noreturn]] void throw_write_failure(const std::string& path, const char* what, int error) {
  throw RuntimeFailure(rank_prefix() + std::string(what) + " " + path + " failed: " + std::strerror(error) +
                       " (disk full or not writable?)");
}

}  // namespace

void SafetensorsWriter::FileCloser::operator()(std::FILE* f) const { std::fclose(f); }

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<SafetensorsEntry> entries, DType dtype,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)), temp_path_(path_ + ".tmp"), dtype_(dtype) {
  TRLHPC_ASSERT(dtype == DType::F32 || dtype == DType::BF16, "safetensors output is F32 or BF16");
  // ordered_json keeps __metadata__ first and the tensors in file order, as people expect to read them.
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  const uint64_t element_size = dtype_size(dtype);
  for (const auto& entry : entries) {
    TRLHPC_ASSERT(!header.contains(entry.name), "tensor " + entry.name + " listed twice");
    const uint64_t bytes = static_cast<uint64_t>(shape_numel(entry.shape)) * element_size;
    header[entry.name] = {{"dtype", dtype_name(dtype)}, {"shape", entry.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    total_elements_ += shape_numel(entry.shape);
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // the data section starts 8-byte aligned

  file_.reset(std::fopen(temp_path_.c_str(), "wb"));
  if (!file_) throw_write_failure(temp_path_, "creating", errno);
  const uint64_t length = text.size();  // little-endian u64 (static_assert in safetensors.cpp)
  if (std::fwrite(&length, 8, 1, file_.get()) != 1 || std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size())
    throw_write_failure(temp_path_, "writing", errno);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_) {
    file_.reset();
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void SafetensorsWriter::append(const float* data, int64_t count) {
  TRLHPC_ASSERT(!finished_ && count >= 0 && written_elements_ + count <= total_elements_,
                "appending " + std::to_string(count) + " elements past the planned " + std::to_string(total_elements_) +
                    " of " + path_);
  if (count == 0) return;  // an empty tensor: nothing to write (and `data` may be null)
  if (dtype_ == DType::F32) {
    if (std::fwrite(data, sizeof(float), static_cast<size_t>(count), file_.get()) != static_cast<size_t>(count))
      throw_write_failure(temp_path_, "writing", errno);
  } else {
    constexpr int64_t kChunk = 1 << 16;
    std::vector<uint16_t> buffer(static_cast<size_t>(std::min(count, kChunk)));
    for (int64_t start = 0; start < count; start += kChunk) {
      const int64_t n = std::min(kChunk, count - start);
      for (int64_t i = 0; i < n; ++i) buffer[static_cast<size_t>(i)] = f32_to_bf16(data[start + i]);
      if (std::fwrite(buffer.data(), 2, static_cast<size_t>(n), file_.get()) != static_cast<size_t>(n))
        throw_write_failure(temp_path_, "writing", errno);
    }
  }
  written_elements_ += count;
}

void SafetensorsWriter::finish() {
  TRLHPC_ASSERT(!finished_ && written_elements_ == total_elements_,
                path_ + ": " + std::to_string(written_elements_) + " of " + std::to_string(total_elements_) +
                    " elements were appended before finish()");
  if (std::fflush(file_.get()) != 0 || ::fsync(fileno(file_.get())) != 0) throw_write_failure(temp_path_, "flushing", errno);
  std::FILE* f = file_.release();
  if (std::fclose(f) != 0) throw_write_failure(temp_path_, "closing", errno);
  std::error_code error;
  std::filesystem::rename(temp_path_, path_, error);
  if (error) throw_write_failure(path_, "renaming the temporary file to", error.value());
  finished_ = true;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorRef>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& t : tensors) entries.push_back({t.name, t.shape});
  SafetensorsWriter writer(path, std::move(entries), dtype, metadata);
  for (const auto& t : tensors) writer.append(t.data, shape_numel(t.shape));
  writer.finish();
}

}  // namespace trlhpc
