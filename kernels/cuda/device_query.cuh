#pragma once
// Host-callable GPU discovery (compiled only in CUDA builds; see include/trlhpc/core/device_info.hpp).
#include <string>

namespace trlhpc::cuda {
int visible_device_count();          // 0 when no GPU or no driver
std::string runtime_version_string();
std::string device_name(int device);
}  // namespace trlhpc::cuda
