#pragma once
// Shared by the libFuzzer targets of tests/fuzz (built with -DTRLHPC_FUZZ=ON, clang only; see
// docs/UNTRUSTED_INPUT.md). A target feeds its input to one parser; the only acceptable failure is a
// trlhpc::UserError. Anything else (another exception, a sanitizer report, a crash, a time-out, a
// memory blow-up) is a finding: libFuzzer stops and writes the input as crash-*/timeout-*/oom-*.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// A private scratch folder for targets that need their input as a file (one per process, reused).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("trlhpc_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const std::string& bytes) {
  const auto path = scratch_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path.string();
}

// Runs f; a UserError is the expected way for hostile input to fail.
template <class F>
void expect_user_errors_only(F&& f) {
  try {
    f();
  } catch (const trlhpc::UserError&) {
  }
}

}  // namespace trlhpc::fuzz
