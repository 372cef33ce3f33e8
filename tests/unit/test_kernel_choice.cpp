// The kernel options (--cpu_gemm, --cpu_bf16_gemm, --cuda_attention; docs/CONTRACT.md "Kernel
// choices"): each engine the CPU runs is chosen and named, one it lacks or an unknown value is refused
// naming the option and changing nothing, and choose_kernels turns a refusal into the user's error.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/backend.hpp"

namespace trlhpc {
namespace {

TEST(KernelChoice, Fp32GemmEnginesAreChosenOrRefusedByName) {
  ASSERT_EQ(cpu::choose_cpu_gemm("openblas"), "");
  EXPECT_EQ(cpu::cpu_gemm_name(), "OpenBLAS");
  if (cpu::gemm_avx2_supported()) {
    ASSERT_EQ(cpu::choose_cpu_gemm("avx2"), "");
    EXPECT_EQ(cpu::cpu_gemm_name(), "trlhpc AVX2");
  } else {
    EXPECT_NE(cpu::choose_cpu_gemm("avx2").find("--cpu_gemm avx2: this CPU lacks AVX2"), std::string::npos);
  }
  if (cpu::gemm_avx512_supported()) {
    ASSERT_EQ(cpu::choose_cpu_gemm("avx512"), "");
    EXPECT_EQ(cpu::cpu_gemm_name(), "trlhpc AVX-512");
  } else {
    EXPECT_NE(cpu::choose_cpu_gemm("avx512").find("--cpu_gemm avx512: this CPU lacks AVX-512"), std::string::npos);
  }
  const std::string before = cpu::cpu_gemm_name();
  EXPECT_EQ(cpu::choose_cpu_gemm("AVX2"), "--cpu_gemm AVX2: expected auto, avx512, avx2 or openblas");
  EXPECT_EQ(cpu::cpu_gemm_name(), before) << "a refused value must leave the engine as it was";
  ASSERT_EQ(cpu::choose_cpu_gemm("auto"), "");
  const std::string fastest = cpu::gemm_avx512_supported() ? "trlhpc AVX-512"
                              : cpu::gemm_avx2_supported() ? "trlhpc AVX2"
                                                           : "OpenBLAS";
  EXPECT_EQ(cpu::cpu_gemm_name(), fastest);
}

TEST(KernelChoice, Bf16GemmEnginesAreChosenOrRefusedByName) {
  ASSERT_EQ(cpu::choose_bf16_gemm("f32"), "");
  EXPECT_EQ(cpu::bf16_gemm_engine(), cpu::Bf16GemmEngine::F32);
  for (const auto& [name, engine] : {std::pair{"amx", cpu::Bf16GemmEngine::AMX},
                                     std::pair{"avx512bf16", cpu::Bf16GemmEngine::AVX512BF16}}) {
    const std::string error = cpu::choose_bf16_gemm(name);
    if (cpu::bf16_gemm_available(engine)) {
      EXPECT_EQ(error, "") << name;
      EXPECT_EQ(cpu::bf16_gemm_engine(), engine) << name;
    } else {
      EXPECT_EQ(error.rfind(std::string("--cpu_bf16_gemm ") + name + ": this CPU", 0), 0u) << error;
    }
  }
  const cpu::Bf16GemmEngine before = cpu::bf16_gemm_engine();
  EXPECT_EQ(cpu::choose_bf16_gemm("bf16"), "--cpu_bf16_gemm bf16: expected auto, amx, avx512bf16 or f32");
  EXPECT_EQ(cpu::bf16_gemm_engine(), before);
  ASSERT_EQ(cpu::choose_bf16_gemm("auto"), "");
  const cpu::Bf16GemmEngine fastest = cpu::bf16_gemm_available(cpu::Bf16GemmEngine::AMX) ? cpu::Bf16GemmEngine::AMX
                                      : cpu::bf16_gemm_available(cpu::Bf16GemmEngine::AVX512BF16)
                                          ? cpu::Bf16GemmEngine::AVX512BF16
                                          : cpu::Bf16GemmEngine::F32;
  EXPECT_EQ(cpu::bf16_gemm_engine(), fastest);
}

TEST(KernelChoice, BackendOptionsRefuseBadValuesAsUserErrors) {
  BackendOptions bad_gemm;
  bad_gemm.cpu_gemm = "fast";
  EXPECT_EQ(testing::user_error([&] { choose_kernels(bad_gemm); }),
            "--cpu_gemm fast: expected auto, avx512, avx2 or openblas");
  BackendOptions bad_bf16;
  bad_bf16.cpu_bf16_gemm = "fast";
  EXPECT_EQ(testing::user_error([&] { choose_kernels(bad_bf16); }),
            "--cpu_bf16_gemm fast: expected auto, amx, avx512bf16 or f32");
  BackendOptions bad_attention;  // refused on CPU ranks too, so every rank of a run stops alike
  bad_attention.cuda_attention = "flash";
  EXPECT_EQ(testing::user_error([&] { choose_kernels(bad_attention); }),
            "--cuda_attention flash: expected auto, cudnn or kernel");
  EXPECT_EQ(testing::user_error([] { choose_kernels(BackendOptions{}); }), "") << "empty: keep the current engines";
}

}  // namespace
}  // namespace trlhpc
