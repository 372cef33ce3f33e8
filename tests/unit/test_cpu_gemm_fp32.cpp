// Tests of trlhpc's own fp32 GEMMs, kernels/cpu/gemm_avx512.cpp and kernels/cpu/gemm_avx2.cpp, each
// called directly (whatever matmul would choose), against a double reference, with shapes that cross
// every blocking boundary (tiles 12 x 32 and 6 x 16, kKC 512 split into equal blocks, kMC 144, kNC
// 3072), every transpose, alpha and beta, and the determinism they promise: the same bits for any
// thread count and for any split of the columns (a tensor-parallel slice computes the same values as
// the whole product). And the two kernels give the same bits as each other, so fp32 runs on AVX2 and
// AVX-512 CPUs agree bit for bit. A kernel the CPU cannot run is skipped with the reason.
//
// Tolerance: fp32 products summed over K terms of size <= 1 (random_floats is uniform in [-1, 1]) have
// a rounding error below K * 2^-24 * sum|a||b| in the worst case; with K <= 600, 1e-4 absolute and
// relative is comfortably above what the reference comparison sees (~sqrt(K) * 6e-8 typically).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"
#include "test_support.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

std::vector<double> reference(const std::vector<float>& a, bool ta, const std::vector<float>& b, bool tb,
                              const std::vector<float>& c, int64_t M, int64_t N, int64_t K, double alpha, double beta) {
  std::vector<double> out(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      out[i * N + j] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c[i * N + j]);
    }
  return out;
}

using GemmFn = void (*)(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t, float, float);

struct Kernel {
  const char* name;
  bool (*supported)();
  GemmFn gemm;
};

const Kernel kKernels[] = {{"avx512", trlhpc::cpu::gemm_avx512_supported, trlhpc::cpu::gemm_avx512},
                           {"avx2", trlhpc::cpu::gemm_avx2_supported, trlhpc::cpu::gemm_avx2}};

class GemmFp32 : public ::testing::TestWithParam<Kernel> {
 protected:
  void SetUp() override {
    if (!GetParam().supported())
      GTEST_SKIP() << "this CPU cannot run the " << GetParam().name << " kernel: matmul does not choose it here";
  }
  void gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t M, int64_t N, int64_t K, float alpha,
            float beta) const {
    GetParam().gemm(a, ta, b, tb, c, M, N, K, alpha, beta);
  }
};

TEST_P(GemmFp32, MatchesDoubleReferenceAcrossBlockBoundaries) {
  omp_set_num_threads(2);
  uint64_t seed = 100;
  struct Shape {
    int64_t M, N, K;
  };
  // Edges of the 12 x 32 and 6 x 16 tiles, of MC (144) and KC (512, split into equal blocks), and one N
  // past NC (3072).
  for (Shape s : {Shape{1, 1, 1}, Shape{5, 15, 3}, Shape{7, 17, 9}, Shape{11, 31, 7}, Shape{12, 32, 256},
                  Shape{13, 33, 257}, Shape{145, 65, 300},
                  Shape{300, 100, 513}, Shape{25, 3100, 20}, Shape{289, 129, 600}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 1.0f}, std::pair{-2.0f, 0.25f}}) {
          SCOPED_TRACE(::testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << ta << " tb=" << tb
                                            << " alpha=" << alpha << " beta=" << beta);
          const std::vector<float> a = random_floats(s.M * s.K, seed++), b = random_floats(s.K * s.N, seed++);
          std::vector<float> c = random_floats(s.M * s.N, seed++);
          if (beta == 0.0f) c.assign(c.size(), std::numeric_limits<float>::quiet_NaN());  // must not be read
          const std::vector<double> want = reference(a, ta, b, tb, c, s.M, s.N, s.K, alpha, beta);
          gemm(a.data(), ta, b.data(), tb, c.data(), s.M, s.N, s.K, alpha, beta);
          EXPECT_TRUE(all_close(c, want, 1e-4, 1e-4));
        }
}

TEST_P(GemmFp32, SameBitsForAnyThreadCountAndColumnSplit) {
  const int64_t M = 300, N = 200, K = 530;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      const std::vector<float> a = random_floats(M * K, 7), b = random_floats(K * N, 8), c0 = random_floats(M * N, 9);
      std::vector<std::vector<float>> results;
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        std::vector<float> c = c0;
        gemm(a.data(), ta, b.data(), tb, c.data(), M, N, K, 1.0f, 1.0f);
        results.push_back(c);
      }
      omp_set_num_threads(2);
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(float)));
      // Columns [70, 200) alone, as a tensor-parallel rank holding that slice of b would compute them.
      const int64_t j0 = 70, n = N - j0;
      std::vector<float> b_slice(static_cast<size_t>(K * n)), c_slice(static_cast<size_t>(M * n));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < n; ++j)
          (tb ? b_slice[j * K + k] : b_slice[k * n + j]) = tb ? b[(j0 + j) * K + k] : b[k * N + j0 + j];  // b's layout
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < n; ++j) c_slice[i * n + j] = c0[i * N + j0 + j];
      gemm(a.data(), ta, b_slice.data(), tb, c_slice.data(), M, n, K, 1.0f, 1.0f);
      for (int64_t i = 0; i < M; ++i)
        ASSERT_EQ(0, std::memcmp(&c_slice[i * n], &results[0][i * N + j0], n * sizeof(float))) << "row " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, GemmFp32, ::testing::ValuesIn(kKernels),
                         [](const ::testing::TestParamInfo<Kernel>& info) { return std::string(info.param.name); });

// The AVX2 kernel computes each element with the AVX-512 kernel's operations in its order: the same bits,
// so a run on an AVX2-only CPU reproduces an AVX-512 CPU's fp32 run exactly. Shapes cross both kernels'
// tile edges and a K split into blocks (1100 -> 3 x 367).
TEST(GemmFp32Engines, Avx2GivesTheBitsOfAvx512) {
  if (!trlhpc::cpu::gemm_avx512_supported() || !trlhpc::cpu::gemm_avx2_supported())
    GTEST_SKIP() << "needs a CPU that runs both kernels (AVX-512); this one runs "
                 << (trlhpc::cpu::gemm_avx2_supported() ? "only the AVX2 kernel" : "neither");
  omp_set_num_threads(2);
  uint64_t seed = 500;
  struct Shape {
    int64_t M, N, K;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 19, 33}, Shape{150, 70, 1100}, Shape{37, 3100, 64}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.75f, 1.0f}, std::pair{2.0f, 0.5f}}) {
          SCOPED_TRACE(::testing::Message() << "M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << ta << " tb=" << tb
                                            << " alpha=" << alpha << " beta=" << beta);
          const std::vector<float> a = random_floats(s.M * s.K, seed++), b = random_floats(s.K * s.N, seed++);
          const std::vector<float> c0 = random_floats(s.M * s.N, seed++);
          std::vector<float> c512 = c0, c2 = c0;
          trlhpc::cpu::gemm_avx512(a.data(), ta, b.data(), tb, c512.data(), s.M, s.N, s.K, alpha, beta);
          trlhpc::cpu::gemm_avx2(a.data(), ta, b.data(), tb, c2.data(), s.M, s.N, s.K, alpha, beta);
          EXPECT_EQ(0, std::memcmp(c512.data(), c2.data(), c2.size() * sizeof(float)));
        }
}

}  // namespace
