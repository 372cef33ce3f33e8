#include "trlhpc/ops/backend.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/attention_route.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/runtime/topology.hpp"

#if defined(TRLHPC_HAVE_CUDA)
#include "trlhpc/ops/cuda_ops.hpp"
#endif

extern "C" void openblas_set_num_threads(int);

namespace trlhpc {
namespace {

// Host threads serve both backends: all of the CPU backend's math, the data pipeline and checkpoint
// copies of the CUDA one.
void set_host_threads(const Topology& topology) {
  omp_set_num_threads(topology.cpu_threads());
  openblas_set_num_threads(topology.cpu_threads());
}

// --cuda_attention's value as the CUDA backend takes it; a wrong one is the user's error.
kernels::AttentionPreference cuda_attention_preference(const std::string& value) {
  try {
    return kernels::parse_attention_preference(value);
  } catch (const std::invalid_argument& e) {
    throw UserError(e.what());
  }
}

std::unique_ptr<Ops> make_cuda_backend_or_fail(const Topology& topology, const BackendOptions& options) {
#if defined(TRLHPC_HAVE_CUDA)
  CudaOpsOptions cuda;
  cuda.compute_dtype = options.compute_dtype;
  cuda.allow_tf32 = options.allow_tf32;
  cuda.attention = cuda_attention_preference(options.cuda_attention);
  return make_cuda_backend(topology.gpu_index(), cuda);
#else
  // Unreachable through Topology (a build without CUDA sees no GPU), but an explicit message beats a
  // null backend if a caller builds a binding by hand.
  throw UserError("this trlhpc was built without CUDA (TRLHPC_CUDA=OFF) and cannot use GPU " +
                  std::to_string(topology.gpu_index()) + ": rebuild with the CUDA toolkit or pass --device cpu");
#endif
}

}  // namespace

void choose_kernels(const BackendOptions& options) {
  cuda_attention_preference(options.cuda_attention);  // a wrong value is refused on CPU ranks too
  if (!options.cpu_gemm.empty())
    if (const std::string error = cpu::choose_cpu_gemm(options.cpu_gemm); !error.empty()) throw UserError(error);
  if (!options.cpu_bf16_gemm.empty())
    if (const std::string error = cpu::choose_bf16_gemm(options.cpu_bf16_gemm); !error.empty()) throw UserError(error);
}

std::unique_ptr<Ops> make_ops(const Topology& topology, const BackendOptions& options) {
  TRLHPC_ASSERT(options.compute_dtype == DType::F32 || options.compute_dtype == DType::BF16,
                "compute dtype must be F32 or BF16");
  set_host_threads(topology);
  choose_kernels(options);
  if (topology.device() == Device::CUDA) return make_cuda_backend_or_fail(topology, options);
  return make_cpu_ops(options.compute_dtype);
}

std::string backend_description(const Ops& ops, const Topology& topology) {
  const std::string dtype = ops.compute_dtype() == DType::BF16 ? "bf16 mixed precision" : "fp32";
  if (ops.device() == Device::CUDA)
    return "cuda:" + std::to_string(topology.gpu_index()) + " (" + dtype + ", " + std::to_string(topology.cpu_threads()) +
           " host threads)";
  const std::string gemm = ops.compute_dtype() == DType::BF16 ? cpu::bf16_gemm_name() : cpu::cpu_gemm_name();
  return "cpu (" + dtype + ", " + gemm + " GEMM, " + std::to_string(topology.cpu_threads()) + " threads)";
}

double measure_matmul_flops(Ops& ops, int64_t side) {
  // Best of several single calls: the least disturbed run is the closest to the hardware's rate. 2048
  // or more rather than 1024: the model's GEMMs (K of 512..8192, thousands of rows) run at the
  // large-matrix rate, which 1024^3 underestimates by 5-10 %. F32 operands: under a BF16 compute dtype
  // the backend rounds them as it reads them, as it does the master weights.
  const int64_t n = side;
  const std::vector<float> half(static_cast<size_t>(n * n), 0.5f);
  const Tensor a = ops.allocate({n, n}), b = ops.allocate({n, n}), c = ops.allocate({n, n});
  ops.copy_from_host(a, half.data(), half.size() * sizeof(float));
  ops.copy_from_host(b, half.data(), half.size() * sizeof(float));
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const auto start = std::chrono::steady_clock::now();
    ops.matmul(a, false, b, false, c);
    float done = 0;  // a copy back waits for the product on an asynchronous backend
    ops.copy_to_host(&done, c, sizeof done);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / seconds);
  }
  return best;
}

}  // namespace trlhpc
