// Tests of kernels/cpu/embedding.cpp: forward gather with a vocab slice (ids outside the slice give
// zero rows), backward scatter-add against a double reference and central finite differences,
// accumulation into dtable, and bitwise thread-count independence of the backward.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

// Ids drawn from [lo, hi), with many repeats so the backward has to add several rows into one.
std::vector<int32_t> random_ids(int64_t N, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  std::vector<int32_t> ids(N);
  for (auto& id : ids) id = dist(gen);
  return ids;
}

TEST(CpuEmbedding, ForwardGathersTheSliceAndZerosTheRest) {
  omp_set_num_threads(2);
  for (int64_t N : {1, 7, 33})
    for (int64_t C : {1, 8, 33}) {
      const int64_t V = 11, vocab_start = 5;  // this rank holds ids [5, 16)
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
      const std::vector<int32_t> ids = random_ids(N, 0, 20, 1);
      const std::vector<float> table = random_floats(V * C, 2);
      std::vector<float> out(N * C, std::numeric_limits<float>::quiet_NaN());
      std::vector<double> want(N * C, 0.0);
      for (int64_t n = 0; n < N; ++n)
        if (ids[n] >= vocab_start && ids[n] < vocab_start + V)
          for (int64_t c = 0; c < C; ++c) want[n * C + c] = table[(ids[n] - vocab_start) * C + c];
      trlhpc::cpu::embedding_fwd(ids.data(), table.data(), out.data(), N, C, V, vocab_start);
      EXPECT_TRUE(all_close(out, want, 0, 0));
    }
}

TEST(CpuEmbedding, BackwardScatterAddsIntoTheSlice) {
  omp_set_num_threads(2);
  for (int64_t N : {1, 7, 33, 500})
    for (int64_t C : {1, 8, 33}) {
      const int64_t V = 11, vocab_start = 5;
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
      const std::vector<int32_t> ids = random_ids(N, 0, 20, 3);
      const std::vector<float> dout = random_floats(N * C, 4);
      std::vector<float> dtable = random_floats(V * C, 5);  // dtable accumulates
      std::vector<double> want(dtable.begin(), dtable.end());
      for (int64_t n = 0; n < N; ++n)
        if (ids[n] >= vocab_start && ids[n] < vocab_start + V)
          for (int64_t c = 0; c < C; ++c) want[(ids[n] - vocab_start) * C + c] += dout[n * C + c];
      trlhpc::cpu::embedding_bwd(ids.data(), dout.data(), dtable.data(), N, C, V, vocab_start);
      // Up to ~N/V fp32 additions of O(1) terms per element.
      EXPECT_TRUE(all_close(dtable, want, 1e-6, 1e-5));
    }
}

// L = sum(w * embedding(table)) is linear in the table, so central differences (step 1e-2, sums in
// double) equal the gradient up to double rounding; 1e-6 only covers the kernel's fp32 additions.
TEST(CpuEmbedding, BackwardMatchesFiniteDifferences) {
  const int64_t N = 13, C = 3, V = 6, vocab_start = 2;
  const std::vector<int32_t> ids = random_ids(N, 0, 9, 6);
  const std::vector<float> w = random_floats(N * C, 7);
  std::vector<double> table(V * C, 0.5);
  auto loss = [&]() {
    double l = 0;
    for (int64_t n = 0; n < N; ++n)
      if (ids[n] >= vocab_start && ids[n] < vocab_start + V)
        for (int64_t c = 0; c < C; ++c) l += w[n * C + c] * table[(ids[n] - vocab_start) * C + c];
    return l;
  };
  std::vector<double> fd(V * C);
  for (int64_t i = 0; i < V * C; ++i) {
    const double h = 1e-2, t0 = table[i];
    table[i] = t0 + h;
    const double up = loss();
    table[i] = t0 - h;
    fd[i] = (up - loss()) / (2 * h);
    table[i] = t0;
  }
  std::vector<float> dtable(V * C, 0.0f);
  trlhpc::cpu::embedding_bwd(ids.data(), w.data(), dtable.data(), N, C, V, vocab_start);
  EXPECT_TRUE(all_close(dtable, fd, 1e-6, 1e-6));
}

TEST(CpuEmbedding, BackwardDoesNotDependOnThreadCount) {
  const int64_t N = 4000, C = 64, V = 50;
  const std::vector<int32_t> ids = random_ids(N, 0, V, 8);
  const std::vector<float> dout = random_floats(N * C, 9);
  std::vector<float> one(V * C, 0.0f), three(V * C, 0.0f);
  omp_set_num_threads(1);
  trlhpc::cpu::embedding_bwd(ids.data(), dout.data(), one.data(), N, C, V, 0);
  omp_set_num_threads(3);
  trlhpc::cpu::embedding_bwd(ids.data(), dout.data(), three.data(), N, C, V, 0);
  EXPECT_EQ(one, three);
}

}  // namespace
