// Tests of kernels/cpu/matmul.cpp (matmul, bias_add, bias_bwd) against naive double references.
//
// fp32 sgemm of K terms of size |a||b| <= 1 has error <= ~K * 6e-8 in the worst case and ~sqrt(K) * 6e-8
// typically; with K <= 70 here, 1e-5 absolute + 1e-5 relative bounds it with margin.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// c (M, N) = alpha op(a) op(b) + beta c in double.
std::vector<double> reference_matmul(const std::vector<float>& a, bool ta, const std::vector<float>& b, bool tb,
                                     const std::vector<float>& c, int64_t M, int64_t N, int64_t K, double alpha,
                                     double beta) {
  std::vector<double> out(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double x = ta ? a[k * M + i] : a[i * K + k];
        const double y = tb ? b[j * K + k] : b[k * N + j];
        acc += x * y;
      }
      out[i * N + j] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c[i * N + j]);
    }
  return out;
}

TEST(CpuMatmul, AllTransposesOddShapesAlphaBeta) {
  omp_set_num_threads(2);
  uint64_t seed = 1;
  for (int64_t M : {1, 7, 33})
    for (int64_t N : {1, 5, 64})
      for (int64_t K : {1, 13, 70})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 1.0f}, std::pair{-2.0f, 0.25f}}) {
              SCOPED_TRACE(::testing::Message() << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb
                                                << " alpha=" << alpha << " beta=" << beta);
              const std::vector<float> a = random_floats(M * K, seed++), b = random_floats(K * N, seed++);
              std::vector<float> c = random_floats(M * N, seed++);
              if (beta == 0.0f) c.assign(M * N, kNaN);  // beta = 0 must ignore c, NaN included
              const std::vector<double> want = reference_matmul(a, ta, b, tb, c, M, N, K, alpha, beta);
              trlhpc::cpu::matmul(a.data(), ta, b.data(), tb, c.data(), M, N, K, alpha, beta);
              EXPECT_TRUE(all_close(c, want, 1e-5, 1e-5));
            }
}

TEST(CpuMatmul, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  trlhpc::cpu::matmul(nullptr, false, nullptr, false, c.data(), 2, 3, 0, 1.0f, 0.5f);
  EXPECT_TRUE(all_close(c, {0.5, 1, 1.5, 2, 2.5, 3}, 0, 0));
  c.assign(6, kNaN);
  trlhpc::cpu::matmul(nullptr, false, nullptr, false, c.data(), 2, 3, 0, 1.0f, 0.0f);
  EXPECT_TRUE(all_close(c, std::vector<double>(6, 0.0), 0, 0));
}

TEST(CpuMatmul, BiasAddAndBackward) {
  omp_set_num_threads(2);
  for (int64_t N : {1, 7, 33})
    for (int64_t C : {1, 5, 64, 130}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
      std::vector<float> y = random_floats(N * C, 10), bias = random_floats(C, 11);
      std::vector<double> want(N * C);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) want[n * C + c] = static_cast<double>(y[n * C + c]) + bias[c];
      trlhpc::cpu::bias_add(y.data(), bias.data(), N, C);
      EXPECT_TRUE(all_close(y, want, 1e-7, 1e-7)) << "bias_add";

      // dbias accumulates: start from a non-zero value.
      const std::vector<float> dy = random_floats(N * C, 12);
      std::vector<float> dbias = random_floats(C, 13);
      std::vector<double> want_db(dbias.begin(), dbias.end());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) want_db[c] += dy[n * C + c];
      trlhpc::cpu::bias_bwd(dy.data(), dbias.data(), N, C);
      EXPECT_TRUE(all_close(dbias, want_db, 1e-6, 1e-6)) << "bias_bwd";
    }
}

// bias = gradient of L = sum(w * (y + bias)) with respect to bias: central differences of this linear
// function are exact up to rounding (step 1e-3 on O(1) values, double sums), so 1e-6 is generous.
TEST(CpuMatmul, BiasBackwardMatchesFiniteDifferences) {
  const int64_t N = 7, C = 5;
  const std::vector<float> y = random_floats(N * C, 20), bias = random_floats(C, 21), w = random_floats(N * C, 22);
  auto loss = [&](const std::vector<double>& b) {
    double l = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) l += w[n * C + c] * (y[n * C + c] + b[c]);
    return l;
  };
  std::vector<double> fd(C), b(bias.begin(), bias.end());
  for (int64_t c = 0; c < C; ++c) {
    const double h = 1e-3, b0 = b[c];
    b[c] = b0 + h;
    const double up = loss(b);
    b[c] = b0 - h;
    fd[c] = (up - loss(b)) / (2 * h);
    b[c] = b0;
  }
  std::vector<float> dbias(C, 0.0f);
  trlhpc::cpu::bias_bwd(w.data(), dbias.data(), N, C);
  EXPECT_TRUE(all_close(dbias, fd, 1e-6, 1e-6));
}

TEST(CpuMatmul, BiasBackwardDoesNotDependOnThreadCount) {
  const int64_t N = 1000, C = 300;
  const std::vector<float> dy = random_floats(N * C, 30);
  std::vector<float> one(C, 0.0f), three(C, 0.0f);
  omp_set_num_threads(1);
  trlhpc::cpu::bias_bwd(dy.data(), one.data(), N, C);
  omp_set_num_threads(3);
  trlhpc::cpu::bias_bwd(dy.data(), three.data(), N, C);
  EXPECT_EQ(one, three);
}

}  // namespace
