// A .safetensors file from a model directory: header JSON, dtypes, shapes and offsets are untrusted.
#include "fuzz_support.hpp"
#include "trlhpc/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trlhpc::fuzz::write_file("model.safetensors", trlhpc::fuzz::as_text(data, size));
  trlhpc::fuzz::expect_user_errors_only([&] {
    const trlhpc::SafetensorsReader reader(path);
    for (const auto& info : reader.tensors()) {
      (void)reader.bytes(info.name);
      if (info.numel() <= (int64_t{1} << 16)) (void)reader.read_f32(info.name);
    }
  });
  return 0;
}
