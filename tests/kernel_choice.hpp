#pragma once
// The GEMM engines a test binary runs, from its own command line: `--cpu_gemm ENGINE` and
// `--cpu_bf16_gemm ENGINE` (the options of `trlhpc sft`), so CTest runs one test file once per engine
// a CPU class would select (tests/CMakeLists.txt). Consumed from argv; a refused engine ends the
// binary with the kernels' message and exit 2 before any test runs.
namespace trlhpc::testing {

void choose_kernels_from_args(int& argc, char** argv);

}  // namespace trlhpc::testing
