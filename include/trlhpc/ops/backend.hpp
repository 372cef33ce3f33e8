#pragma once
// The backend seam: the one place that turns "where this rank computes" (Topology's device binding) into
// an Ops. sft, export, generate and the benchmarks call make_ops; nothing else names CpuOps or CudaOps.
//
//   Topology says cpu   -> the CPU backend: OpenMP and OpenBLAS get topology.cpu_threads() threads,
//                          the GEMM engines are chosen (--cpu_gemm, --cpu_bf16_gemm; UserError naming
//                          the option when the CPU lacks one).
//   Topology says cuda  -> the CUDA backend on topology.gpu_index() (CUDA builds; cudaSetDevice is done
//                          by the backend). The host threads still get cpu_threads() (data preparation,
//                          checkpoint copies). A build without CUDA never binds a GPU (Topology sees 0).
//
// `--device cuda` without a visible GPU is refused earlier, by Topology::discover, with the host named.
//
// In the `ops` target together with both backends (CudaOps' .cu files join it in CUDA builds), which
// sits above `runtime` (Topology) and `cuda` (the kernels): no link cycle (docs/ARCHITECTURE.md "Layering").
#include <memory>
#include <string>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

class Topology;

struct BackendOptions {
  DType compute_dtype = DType::F32;  // --bf16: BF16 (the mixed-precision recipe, docs/ARCHITECTURE.md)
  bool allow_tf32 = false;           // CUDA only: F32 GEMMs on TF32 tensor cores
  // The kernel engines (docs/CONTRACT.md "Kernel choices"); empty: keep the process's current choice
  // ("auto" unless a test or benchmark chose before).
  std::string cpu_gemm;        // --cpu_gemm auto|avx512|avx2|openblas (process-wide, kernels/cpu.hpp)
  std::string cpu_bf16_gemm;   // --cpu_bf16_gemm auto|amx|avx512bf16|f32 (process-wide)
  std::string cuda_attention;  // --cuda_attention auto|cudnn|kernel (this CUDA backend)
};

// Applies options' CPU engine choices and checks --cuda_attention's value, throwing UserError naming the
// option when one cannot run here. make_ops calls it (the CUDA backend takes cuda_attention itself);
// `trlhpc env` calls it to report what a run with the same options would use.
void choose_kernels(const BackendOptions& options);

std::unique_ptr<Ops> make_ops(const Topology& topology, const BackendOptions& options = {});

// "cpu (avx512-bf16 GEMM, 2 threads)", "cuda:0 (NVIDIA H200)": for start lines and `trlhpc env`.
std::string backend_description(const Ops& ops, const Topology& topology);

// The backend's measured GEMM rate in FLOP/s (the second MFU reference beside the nominal peak,
// nominal_peak.hpp): best of several side^3 products in the compute dtype (on the CPU under BF16: the
// mixed bf16 GEMM). `side` >= 2048: smaller cubes run below the large-matrix rate the model's GEMMs reach.
double measure_matmul_flops(Ops& ops, int64_t side = 2048);

}  // namespace trlhpc
