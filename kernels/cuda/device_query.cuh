#pragma once
// Host-callable GPU discovery, compiled only in CUDA builds (TRLHPC_HAVE_CUDA); runtime/topology uses it.
#include <string>

namespace trlhpc::cuda {
int visible_device_count();          // 0 when no GPU or no driver
std::string runtime_version_string();
std::string device_name(int device);
}  // namespace trlhpc::cuda
