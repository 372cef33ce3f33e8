// CUDA matmul (cuBLASLt) and bias ops against the CPU backend: every transpose combination, odd and
// degenerate shapes, alpha/beta (beta = 0 over a NaN-poisoned c), misaligned operand views, fp32 and
// bf16 operands with fp32 or bf16 output.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

struct Case {
  int64_t M, N, K;
  DType ab, c;
};

void check_matmul(Backends& be, const Case& cs, bool ta, bool tb, float alpha, float beta, int64_t offset, uint64_t seed) {
  const Shape a_shape = ta ? Shape{cs.K, cs.M} : Shape{cs.M, cs.K};
  const Shape b_shape = tb ? Shape{cs.N, cs.K} : Shape{cs.K, cs.N};
  // Operands live `offset` elements into a larger buffer, so their addresses are not 16-byte aligned.
  auto operand = [&](const Shape& shape, uint64_t s) {
    const int64_t n = shape_numel(shape);
    Pair whole = both(be, random_floats(static_cast<size_t>(n + offset), s), {n + offset}, cs.ab);
    return Pair{whole.cpu.view(shape, offset), whole.gpu.view(shape, offset)};
  };
  const Pair a = operand(a_shape, seed), b = operand(b_shape, seed + 1);
  const Pair c = beta == 0.0f ? both_poisoned(be, {cs.M, cs.N}, cs.c)
                              : both(be, random_floats(static_cast<size_t>(cs.M * cs.N), seed + 2), {cs.M, cs.N}, cs.c);
  be.cpu->matmul(a.cpu, ta, b.cpu, tb, c.cpu, alpha, beta);
  be.gpu->matmul(a.gpu, ta, b.gpu, tb, c.gpu, alpha, beta);
  const double tol = cs.ab == DType::BF16 || cs.c == DType::BF16 ? kBf16Tolerance : kF32Tolerance;
  EXPECT_TRUE(matches(be, c, tol)) << "M " << cs.M << " N " << cs.N << " K " << cs.K << " trans " << ta << tb
                                   << " alpha " << alpha << " beta " << beta << " offset " << offset << " ab "
                                   << dtype_name(cs.ab) << " c " << dtype_name(cs.c);
}

TEST(CudaMatmul, MatchesCpuForEveryTransposeAndDtype) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const std::vector<Case> shapes = {{1, 1, 1, DType::F32, DType::F32},       {37, 53, 29, DType::F32, DType::F32},
                                    {64, 896, 128, DType::F32, DType::F32},  {130, 7, 300, DType::F32, DType::F32},
                                    {37, 53, 29, DType::BF16, DType::F32},   {64, 896, 128, DType::BF16, DType::F32},
                                    {37, 53, 29, DType::BF16, DType::BF16},  {256, 320, 64, DType::BF16, DType::BF16}};
  uint64_t seed = 1;
  for (const Case& cs : shapes)
    for (int t = 0; t < 4; ++t) {
      check_matmul(be, cs, t & 1, t & 2, 1.0f, 0.0f, 0, seed += 3);
      check_matmul(be, cs, t & 1, t & 2, 0.5f, 1.0f, 0, seed += 3);
    }
  // Misaligned views and a general alpha/beta.
  for (int64_t offset : {1, 2, 3})
    for (const Case& cs : {Case{33, 17, 65, DType::F32, DType::F32}, Case{48, 32, 64, DType::BF16, DType::F32}})
      check_matmul(be, cs, false, true, -0.75f, 0.25f, offset, seed += 3);
}

TEST(CudaMatmul, EmptyInnerDimensionScalesOrClears) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Pair a = both(be, {}, {5, 0}), b = both(be, {}, {0, 4});
  const Pair cleared = both_poisoned(be, {5, 4});
  be.cpu->matmul(a.cpu, false, b.cpu, false, cleared.cpu, 1.0f, 0.0f);
  be.gpu->matmul(a.gpu, false, b.gpu, false, cleared.gpu, 1.0f, 0.0f);
  EXPECT_TRUE(matches(be, cleared, 0.0));
  const Pair scaled = both(be, random_floats(20, 9), {5, 4});
  be.cpu->matmul(a.cpu, false, b.cpu, false, scaled.cpu, 1.0f, 2.0f);
  be.gpu->matmul(a.gpu, false, b.gpu, false, scaled.gpu, 1.0f, 2.0f);
  EXPECT_TRUE(matches(be, scaled, 0.0));
}

TEST(CudaBias, AddAndBackwardMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (DType dtype : {DType::F32, DType::BF16})
    for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {37, 29}, {600, 896}}) {
      const Pair y = both(be, random_floats(static_cast<size_t>(N * C), 3), {N, C}, dtype);
      const Pair bias = both(be, random_floats(static_cast<size_t>(C), 4), {C});
      be.cpu->bias_add(y.cpu, bias.cpu);
      be.gpu->bias_add(y.gpu, bias.gpu);
      EXPECT_TRUE(matches(be, y, tolerance(dtype))) << "bias_add N " << N << " C " << C;
      // bias_bwd accumulates into dbias: start both from the same values.
      const Pair dbias = both(be, random_floats(static_cast<size_t>(C), 5), {C});
      be.cpu->bias_bwd(y.cpu, dbias.cpu);
      be.gpu->bias_bwd(y.gpu, dbias.gpu);
      EXPECT_TRUE(matches(be, dbias, kF32Tolerance)) << "bias_bwd N " << N << " C " << C;
    }
}

}  // namespace
}  // namespace trlhpc::cuda_test
