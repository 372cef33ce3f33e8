#include "trlhpc/comm/gpu_sharing.hpp"

#include <algorithm>
#include <numeric>

#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_check.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include "device_query.cuh"
#endif

namespace trlhpc {

namespace {

// Every rank's string, by rank: lengths first (MPI_Allgather), then the bytes (MPI_Allgatherv).
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size)), displs(static_cast<size_t>(size));  // (size)
  TRLHPC_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::exclusive_scan(lengths.begin(), lengths.end(), displs.begin(), 0);
  std::string all(static_cast<size_t>(displs.back() + lengths.back()), '\0');
  TRLHPC_CHECK_MPI(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR,
                                  comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  return out;
}

}  // namespace

bool any_gpu_shared(std::span<const GpuIdentity> ranks) {
  for (size_t i = 0; i < ranks.size(); ++i)
    for (size_t j = i + 1; j < ranks.size(); ++j)
      if (ranks[i] == ranks[j]) return true;
  return false;
}

std::vector<GpuIdentity> gather_gpu_identities(MPI_Comm comm, const GpuIdentity& mine) {
  const std::vector<std::string> hosts = gather_strings(comm, mine.host);
  const std::vector<std::string> devices = gather_strings(comm, mine.device);
  std::vector<GpuIdentity> table(hosts.size());
  for (size_t r = 0; r < table.size(); ++r) table[r] = GpuIdentity{hosts[r], devices[r]};
  return table;
}

bool ranks_share_a_gpu(MPI_Comm comm, const GpuIdentity& mine) {
  return any_gpu_shared(gather_gpu_identities(comm, mine));
}

GpuIdentity local_gpu_identity(int gpu_index) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  TRLHPC_CHECK_MPI(MPI_Get_processor_name(name, &length));
  std::string device;
#ifdef TRLHPC_HAVE_CUDA
  device = cuda::pci_bus_id(gpu_index);
#endif
  if (device.empty()) device = "ordinal " + std::to_string(gpu_index);
  return GpuIdentity{std::string(name, static_cast<size_t>(length)), device};
}

}  // namespace trlhpc
