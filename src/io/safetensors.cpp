// SafetensorsReader: header validation and fp32 reads. The writer is in safetensors_writer.cpp.
#include "trlhpc/io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is this host");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit

// Element size of every dtype the format defines; 0 for unknown names.
size_t safetensors_element_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

template <class T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <class Convert>
void convert_elements(const std::byte* src, size_t element_size, int64_t count, float* out, Convert convert) {
#pragma omp parallel for schedule(static) if (count >= (int64_t{1} << 20))
  for (int64_t i = 0; i < count; ++i) out[i] = convert(src + static_cast<size_t>(i) * element_size);
}

// Every header problem reads "<path>: invalid safetensors file: <problem>; re-download or re-save it".
UserError invalid_file(const std::string& path, const std::string& problem) {
  return UserError(path + ": invalid safetensors file: " + problem + "; re-download or re-save it");
}

// The 8-byte little-endian header length, checked against the format's limit and the file size before
// anything reads past it.
uint64_t read_header_size(const MappedFile& file) {
  const uint64_t file_size = file.size();
  if (file_size < 8)
    throw invalid_file(file.path(),
                       "truncated: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  const uint64_t header_size = load<uint64_t>(file.data());
  if (header_size == 0 || header_size > kMaxHeaderBytes)
    throw invalid_file(file.path(), "header length " + std::to_string(header_size) + " is outside 1.." +
                                        std::to_string(kMaxHeaderBytes));
  if (header_size > file_size - 8)
    throw invalid_file(file.path(), "truncated: the header length says " + std::to_string(header_size) +
                                        " bytes but only " + std::to_string(file_size - 8) + " follow");
  return header_size;
}

// The header text after the length must be one JSON object.
nlohmann::json parse_header_json(const std::string& path, const std::byte* begin, uint64_t size) {
  const char* text = reinterpret_cast<const char*>(begin);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, text + size);
  } catch (const nlohmann::json::exception& e) {
    throw invalid_file(path, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw invalid_file(path, "the header is not a JSON object");
  return header;
}

// "__metadata__": a flat object of strings.
void read_metadata(const std::string& path, const nlohmann::json& entry, std::map<std::string, std::string>& out) {
  if (!entry.is_object()) throw invalid_file(path, "__metadata__ is not an object");
  for (const auto& [key, value] : entry.items()) {
    if (!value.is_string()) throw invalid_file(path, "__metadata__." + key + " is not a string");
    out[key] = value.get<std::string>();
  }
}

// The shape as sizes, and its element count. Each size and the product stay under 2^48 so that byte
// counts (numel * element size) cannot overflow later.
uint64_t read_shape(const std::string& path, const std::string& where, const nlohmann::json& shape,
                    std::vector<int64_t>& out) {
  if (!shape.is_array()) throw invalid_file(path, where + ": shape is not a list");
  uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned())
      throw invalid_file(path, where + ": shape " + shape.dump() + " is not a list of sizes");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > (uint64_t{1} << 48) || __builtin_mul_overflow(numel, dim, &numel) || numel > (uint64_t{1} << 48))
      throw invalid_file(path, where + ": shape " + shape.dump() + " is too large");
    out.push_back(static_cast<int64_t>(dim));
  }
  return numel;
}

// One tensor entry {"dtype", "shape", "data_offsets"}: the offsets must lie inside the data section and
// span exactly the bytes the dtype and shape need.
SafetensorsTensorInfo read_tensor_entry(const std::string& path, const std::string& name, const nlohmann::json& entry,
                                        uint64_t data_size) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    throw invalid_file(path, where + " needs dtype, shape and data_offsets");
  SafetensorsTensorInfo info;
  info.name = name;
  if (!entry["dtype"].is_string()) throw invalid_file(path, where + ": dtype is not a string");
  info.dtype = entry["dtype"].get<std::string>();
  info.element_size = safetensors_element_size(info.dtype);
  if (info.element_size == 0) throw invalid_file(path, where + ": unknown dtype '" + info.dtype + "'");
  const uint64_t numel = read_shape(path, where, entry["shape"], info.shape);
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw invalid_file(path, where + ": data_offsets is not [begin, end]");
  info.data_begin = offsets[0].get<uint64_t>();
  info.data_end = offsets[1].get<uint64_t>();
  if (info.data_begin > info.data_end || info.data_end > data_size)
    throw invalid_file(path, where + ": data_offsets [" + std::to_string(info.data_begin) + ", " +
                                 std::to_string(info.data_end) + "] outside the data section of " +
                                 std::to_string(data_size) + " bytes (file truncated?)");
  if (info.data_end - info.data_begin != numel * info.element_size)
    throw invalid_file(path, where + ": data_offsets span " + std::to_string(info.data_end - info.data_begin) +
                                 " bytes but shape " + shape_string(info.shape) + " of " + info.dtype + " needs " +
                                 std::to_string(numel * info.element_size));
  return info;
}

// Sorts the tensors by offset and checks they tile the data section: no overlap, no gap, nothing left over.
void sort_and_check_tiling(const std::string& path, std::vector<SafetensorsTensorInfo>& tensors, uint64_t data_size) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  uint64_t expected_begin = 0;
  for (const auto& info : tensors) {
    if (info.data_begin != expected_begin)
      throw invalid_file(path, "tensor '" + info.name + "' starts at byte " + std::to_string(info.data_begin) +
                                   ", expected " + std::to_string(expected_begin) +
                                   " (tensors overlap or leave a gap)");
    expected_begin = info.data_end;
  }
  if (expected_begin != data_size)
    throw invalid_file(path, "the tensors cover " + std::to_string(expected_begin) + " bytes of a " +
                                 std::to_string(data_size) + "-byte data section");
}

}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) { parse_header(); }

// Layout: 8-byte header length, JSON header, data section. Every check throws UserError naming the file.
void SafetensorsReader::parse_header() {
  const std::string& path = file_.path();
  const uint64_t header_size = read_header_size(file_);
  data_section_ = file_.data() + 8 + header_size;
  data_size_ = file_.size() - 8 - header_size;

  const nlohmann::json header = parse_header_json(path, file_.data() + 8, header_size);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") read_metadata(path, entry, metadata_);
    else tensors_.push_back(read_tensor_entry(path, name, entry, data_size_));
  }
  sort_and_check_tiling(path, tensors_, data_size_);
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const SafetensorsTensorInfo& SafetensorsReader::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    throw UserError(path() + ": no tensor named '" + name + "' (the file holds " + std::to_string(tensors_.size()) +
                    " tensors); is this the right model?");
  return tensors_[it->second];
}

std::span<const std::byte> SafetensorsReader::bytes(const std::string& name) const {
  const auto& t = info(name);
  return {data_section_ + t.data_begin, static_cast<size_t>(t.data_end - t.data_begin)};
}

void SafetensorsReader::read_f32(const std::string& name, int64_t begin, int64_t end, float* out) const {
  const auto& t = info(name);
  TRLHPC_ASSERT(0 <= begin && begin <= end && end <= t.numel(),
                "slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside " + name + " " +
                    shape_string(t.shape));
  const std::byte* src = data_section_ + t.data_begin + static_cast<size_t>(begin) * t.element_size;
  const int64_t count = end - begin;
  const size_t size = t.element_size;
  if (t.dtype == "F32") convert_elements(src, size, count, out, [](const std::byte* p) { return load<float>(p); });
  else if (t.dtype == "BF16")
    convert_elements(src, size, count, out, [](const std::byte* p) { return bf16_to_f32(load<uint16_t>(p)); });
  else if (t.dtype == "F16")
    convert_elements(src, size, count, out, [](const std::byte* p) { return f16_to_f32(load<uint16_t>(p)); });
  else if (t.dtype == "F64")
    convert_elements(src, size, count, out, [](const std::byte* p) { return static_cast<float>(load<double>(p)); });
  else if (t.dtype == "I32")
    convert_elements(src, size, count, out, [](const std::byte* p) { return static_cast<float>(load<int32_t>(p)); });
  else if (t.dtype == "I64")
    convert_elements(src, size, count, out, [](const std::byte* p) { return static_cast<float>(load<int64_t>(p)); });
  else
    throw UserError(path() + ": tensor '" + name + "' has dtype " + t.dtype +
                    "; trlhpc reads F32, BF16, F16, F64, I32 and I64 tensors (convert the checkpoint first)");
  // The converted values are the caller's now: keeping the file pages mapped would count the whole
  // read (the whole model on a rank that loads it all) in this process's resident memory until the
  // file is closed.
  file_.drop_resident(static_cast<size_t>(src - file_.data()), static_cast<size_t>(count) * size);
}

std::vector<float> SafetensorsReader::read_f32(const std::string& name) const {
  std::vector<float> out(static_cast<size_t>(info(name).numel()));
  read_f32(name, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

}  // namespace trlhpc
