// CUDA matmul (cuBLASLt) and bias ops against the CPU backend: every transpose combination, odd and
// degenerate shapes, alpha/beta (beta = 0 over a NaN-poisoned c), misaligned operand views, fp32 and
// bf16 operands with fp32 or bf16 output. The review's defects (docs/CUDA-REVIEW-FIXES.md): fp32 operands
// into a bf16 output refused up front (4), the bf16 recipe's fp32 dlogits x bf16 weight (4), a plan cache
// that stays bounded under variable row counts (7), and bias gradients beyond 65,535 row blocks (3).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <set>

#include "cuda_raii.cuh"
#include "cuda_test_util.hpp"
#include "device_allocator.cuh"
#include "matmul.cuh"
#include "trlhpc/kernels/matmul_plan_cache.hpp"

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

// docs/CUDA-REVIEW-FIXES.md defect 4: fp32 x fp32 -> bf16 has no cuBLAS path; it must be refused with a clear
// message before anything is queued, and the backend must work on afterwards.
TEST(CudaMatmul, Fp32OperandsIntoBf16OutputAreRefusedUpFront) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Pair a = both(be, random_floats(12 * 8, 1), {12, 8}), b = both(be, random_floats(8 * 5, 2), {8, 5});
  const Pair c_bf16 = both_poisoned(be, {12, 5}, DType::BF16);
  try {
    be.gpu->matmul(a.gpu, false, b.gpu, false, c_bf16.gpu, 1.0f, 0.0f);
    ADD_FAILURE() << "fp32 x fp32 -> bf16 was accepted";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 output"), std::string::npos) << e.what();
  }
  check_matmul(be, Case{12, 5, 8, DType::F32, DType::F32}, false, false, 1.0f, 0.0f, 0, 3);
}

// The decoder's dlogits (fp32) times a bf16 compute weight under the bf16 recipe: the fp32 operand is
// rounded to bf16 (as the CPU rounds it while packing), so the GEMM is bf16 x bf16 -> fp32.
TEST(CudaMatmul, Bf16RecipeTakesFp32DlogitsTimesBf16Weight) {
  TRLHPC_REQUIRE_GPU();
  CudaOpsOptions options;
  options.compute_dtype = DType::BF16;
  Backends be;
  be.gpu = make_cuda_backend(0, options);
  const int64_t M = 40, V = 96, C = 64;
  const std::vector<float> dlogits = random_floats(size_t(M * V), 4), weight = round_bf16(random_floats(size_t(V * C), 5));
  const Pair dz{upload(*be.cpu, round_bf16(dlogits), {M, V}), upload(*be.gpu, dlogits, {M, V})};  // F32 on the GPU
  const Pair w{upload(*be.cpu, weight, {V, C}), upload(*be.gpu, weight, {V, C}, DType::BF16)};
  const Pair dh = both_poisoned(be, {M, C});
  be.cpu->matmul(dz.cpu, false, w.cpu, false, dh.cpu, 1.0f, 0.0f);
  be.gpu->matmul(dz.gpu, false, w.gpu, false, dh.gpu, 1.0f, 0.0f);
  EXPECT_TRUE(matches(be, dh, 1e-5)) << "bf16 x bf16 with fp32 accumulation on both sides";
}

// docs/CUDA-REVIEW-FIXES.md defect 7: packing rows of every length from 1 to 700 tokens must neither grow the plan
// cache past its bound nor call the heuristic once per length; the results stay right.
TEST(CudaMatmul, VariableRowCountsKeepThePlanCacheBounded) {
  TRLHPC_REQUIRE_GPU();
  TRLHPC_CHECK_CUDA(cudaSetDevice(0));
  cuda::DeviceAllocator allocator(0);
  cuda::CudaStream stream;
  cuda::Matmul matmul(allocator, int64_t{32} << 20, false);
  const int64_t maxM = 700, N = 64, K = 48;
  const std::vector<float> a = random_floats(size_t(maxM * K), 6), b = random_floats(size_t(K * N), 7);
  cuda::DeviceBuffer<float> a_d(allocator, maxM * K), b_d(allocator, K * N), c_d(allocator, maxM * N);
  TRLHPC_CHECK_CUDA(cudaMemcpy(a_d.get(), a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  TRLHPC_CHECK_CUDA(cudaMemcpy(b_d.get(), b.data(), b.size() * 4, cudaMemcpyHostToDevice));
  std::set<int64_t> buckets;
  for (int64_t M = 1; M <= maxM; ++M) {
    matmul.run(a_d.get(), false, b_d.get(), false, c_d.get(), CUDA_R_32F, CUDA_R_32F, M, N, K, 1.0f, 0.0f,
               stream.get());
    buckets.insert(kernels::matmul_rows_bucket(M));
  }
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(stream.get()));
  EXPECT_LE(matmul.cached_plans(), 256);
  // One heuristic call per bucket, plus the few lengths whose bucket algorithm cuBLASLt refused.
  EXPECT_LE(matmul.heuristic_calls(), static_cast<int64_t>(buckets.size()) + maxM / 10)
      << buckets.size() << " buckets";
  std::vector<float> c(size_t(maxM * N));
  TRLHPC_CHECK_CUDA(cudaMemcpy(c.data(), c_d.get(), c.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<float> want(c.size());
  for (int64_t i = 0; i < maxM; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += double(a[size_t(i * K + k)]) * b[size_t(k * N + j)];
      want[size_t(i * N + j)] = static_cast<float>(sum);
    }
  EXPECT_TRUE(close_normalized(c, want, kF32Tolerance));
}

// docs/CUDA-REVIEW-FIXES.md defect 3: more than 65,535 x 256 = 16.77M rows (gridDim.y's limit) in a bias gradient.
TEST(CudaBias, BackwardBeyondTheGridLimit) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t N = 17'000'000, C = 2;
  const Pair dy = both(be, random_floats(size_t(N * C), 8), {N, C});
  const Pair dbias = both(be, {0.5f, -0.25f}, {C});
  be.cpu->bias_bwd(dy.cpu, dbias.cpu);
  be.gpu->bias_bwd(dy.gpu, dbias.gpu);
  EXPECT_TRUE(matches(be, dbias, 1e-4)) << "N " << N;
}

}  // namespace
}  // namespace trlhpc::cuda_test
