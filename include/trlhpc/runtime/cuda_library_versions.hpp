#pragma once
// Versions of the CUDA-side libraries trlhpc was linked against, for `trlhpc env`. CUDA builds only
// (defined in src/runtime/cuda_library_versions.cu). None of them needs a GPU or a driver.
#include <string>

namespace trlhpc::cuda {
std::string toolkit_version_string();  // "13.0" (CUDA runtime headers compiled against)
std::string nccl_version_string();     // "2.28.9"
std::string cudnn_version_string();    // "9.10.2"
}  // namespace trlhpc::cuda
