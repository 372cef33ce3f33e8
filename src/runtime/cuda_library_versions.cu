// Versions of the CUDA-side libraries (see include/trlhpc/runtime/cuda_library_versions.hpp).
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "trlhpc/runtime/cuda_library_versions.hpp"

namespace trlhpc::cuda {

namespace {
std::string dotted(long major, long minor, long patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}
}  // namespace

std::string toolkit_version_string() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

std::string nccl_version_string() {
  int code = 0;  // major*10000 + minor*100 + patch since NCCL 2.9
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  return dotted(code / 10000, code % 10000 / 100, code % 100);
}

std::string cudnn_version_string() {
  const long code = static_cast<long>(cudnnGetVersion());  // major*10000 + minor*100 + patch since cuDNN 9
  return dotted(code / 10000, code % 10000 / 100, code % 100);
}

}  // namespace trlhpc::cuda
