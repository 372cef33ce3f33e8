#pragma once
// Host-callable GPU discovery, compiled only in CUDA builds (TRLHPC_HAVE_CUDA); runtime/topology uses it.
#include <string>

#include "trlhpc/kernels/attention_smem_plan.hpp"

namespace trlhpc::cuda {
int visible_device_count();          // 0 when no GPU or no driver
std::string runtime_version_string();
std::string device_name(int device);
// The device's PCI bus id ("0000:3b:00.0"): the same physical GPU under any CUDA_VISIBLE_DEVICES
// numbering. Empty when the query fails (no driver, bad ordinal).
std::string pci_bus_id(int device);
// The device's shared memory per block (opt-in), per SM and reserved per block: what the attention tile
// choice budgets (attention_smem_plan.hpp). Throws RuntimeFailure when the query fails.
kernels::SmemLimits device_smem_limits(int device);
}  // namespace trlhpc::cuda
