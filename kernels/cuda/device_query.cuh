#pragma once
// Host-callable GPU discovery, compiled only in CUDA builds (TRLHPC_HAVE_CUDA); runtime/topology uses it.
#include <string>

namespace trlhpc::cuda {
int visible_device_count();          // 0 when no GPU or no driver
std::string runtime_version_string();
std::string device_name(int device);
// The device's PCI bus id ("0000:3b:00.0"): the same physical GPU under any CUDA_VISIBLE_DEVICES
// numbering. Empty when the query fails (no driver, bad ordinal).
std::string pci_bus_id(int device);
}  // namespace trlhpc::cuda
