#pragma once
// What the CPU BLAS (OpenBLAS) runs: its kernel family, and a warning when the environment holds it
// below what the CPU can do.
//
// A DYNAMIC_ARCH OpenBLAS picks its kernels when it is loaded, from the CPU or from OPENBLAS_CORETYPE.
// Pinning an AVX2 core (e.g. OPENBLAS_CORETYPE=Haswell, set machine-wide on some systems) on an AVX-512
// CPU halves sgemm: on 2 AMD EPYC Zen 5 cores, 225-240 GFLOP/s with Haswell kernels against 410-460
// with the AVX-512 ones OpenBLAS picks by itself there (Cooperlake), and the SFT step follows
// (bench/RESULTS.md). trlhpc never overrides the variable: it is the user's choice. Since issue 17 the
// model's matmuls run trlhpc's own AVX-512 GEMM on such CPUs (cpu::cpu_gemm_name()), which does not
// read the variable, so it matters only with --cpu_gemm openblas or on CPUs without AVX-512.
#include <string>

namespace trlhpc {

// The OpenBLAS core in use ("Cooperlake", "Haswell", ...).
std::string cpu_blas_core();

// Non-empty when the matmuls run OpenBLAS and OPENBLAS_CORETYPE names a core without AVX-512 while the CPU has AVX-512
// F/CD/BW/DQ/VL: one line saying what is lost and how to lift it. Empty otherwise.
std::string cpu_blas_warning();

}  // namespace trlhpc
