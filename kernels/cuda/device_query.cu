// GPU discovery that tolerates a machine without a GPU or driver: cudaGetDeviceCount failing
// (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...) means "no GPU", never an error.
#include <cuda_runtime.h>

#include "device_query.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

int visible_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return 0;
  }
  return count;
}

std::string runtime_version_string() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  return "runtime " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
         (driver ? ", driver " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10)
                 : std::string(", no driver"));
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown";
  return prop.name;
}

std::string pci_bus_id(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof(id)), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

kernels::SmemLimits device_smem_limits(int device) {
  kernels::SmemLimits l;
  TRLHPC_CHECK_CUDA(cudaDeviceGetAttribute(&l.per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  TRLHPC_CHECK_CUDA(cudaDeviceGetAttribute(&l.per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  TRLHPC_CHECK_CUDA(cudaDeviceGetAttribute(&l.reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device));
  return l;
}

}  // namespace trlhpc::cuda
