#include "trlhpc/runtime/library_versions.hpp"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>

#include <boost/version.hpp>
#include <nlohmann/json.hpp>

#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/runtime/cpu_blas.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include "device_query.cuh"
#include "trlhpc/runtime/cuda_library_versions.hpp"
#endif

namespace trlhpc {

namespace {
std::string first_line(std::string text) {
  const auto end = text.find_first_of("\r\n");
  if (end != std::string::npos) text.resize(end);
  while (!text.empty() && (text.back() == ' ' || text.back() == ',' || text.back() == '\0')) text.pop_back();
  return text;
}

std::string mpi_library_version() {
  char buffer[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(buffer, &length) != MPI_SUCCESS) return "unknown";
  return first_line(std::string(buffer, static_cast<size_t>(length)));
}

std::string mpi_standard_version() {
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  std::string v = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#ifdef H5_HAVE_PARALLEL
  v += " (parallel)";
#endif
  return v;
}

std::string openmp_version() {
#ifdef _OPENMP
  switch (_OPENMP) {
    case 201307: return "4.0";
    case 201511: return "4.5";
    case 201811: return "5.0";
    case 202011: return "5.1";
    case 202111: return "5.2";
    default: return std::to_string(_OPENMP);
  }
#else
  return "off";
#endif
}
}  // namespace

std::vector<LibraryVersion> library_versions() {
  std::vector<LibraryVersion> v;
  v.push_back({"trlhpc", TRLHPC_VERSION});
#if defined(__clang__)
  v.push_back({"compiler", "clang " __VERSION__});
#elif defined(__GNUC__)
  v.push_back({"compiler", "GCC " __VERSION__});
#else
  v.push_back({"compiler", __VERSION__});
#endif
  v.push_back({"MPI standard", mpi_standard_version()});
  v.push_back({"MPI library", mpi_library_version()});
  v.push_back({"HDF5", hdf5_version()});
  v.push_back({"OpenBLAS", first_line(openblas_get_config())});
  v.push_back({"OpenBLAS core", cpu_blas_core() + (cpu_blas_warning().empty() ? "" : " (pinned by OPENBLAS_CORETYPE: AVX-512 unused)")});
  v.push_back({"CPU GEMM", cpu::cpu_gemm_name()});
  v.push_back({"CPU bf16 GEMM", cpu::bf16_gemm_name()});
  v.push_back({"OpenMP", openmp_version()});
  v.push_back({"Boost", std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
                            "." + std::to_string(BOOST_VERSION % 100)});
  v.push_back({"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                    std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                    std::to_string(NLOHMANN_JSON_VERSION_PATCH)});
#ifdef TRLHPC_HAVE_CUDA
  v.push_back({"CUDA toolkit", cuda::toolkit_version_string()});
  v.push_back({"CUDA", cuda::runtime_version_string()});
  v.push_back({"NCCL", cuda::nccl_version_string()});
  v.push_back({"cuDNN", cuda::cudnn_version_string()});
#else
  v.push_back({"CUDA", "not built (CPU-only build)"});
#endif
  return v;
}

}  // namespace trlhpc
