// CUDA RoPE against the CPU backend: positions up to 128K (where the fp32 angle matters), several
// head sizes, fp32 and bf16, and backward o forward = identity.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

std::vector<float> inverse_frequencies(int64_t HS, double theta) {
  std::vector<float> inv(static_cast<size_t>(HS / 2));
  for (int64_t i = 0; i < HS / 2; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / HS));
  return inv;
}

TEST(CudaRope, ForwardAndBackwardMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  std::mt19937 gen(7);
  for (auto [N, H, HS] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 2}, {67, 3, 6}, {300, 14, 64}, {33, 2, 128}})
    for (DType dtype : {DType::F32, DType::BF16}) {
      std::vector<int32_t> pos(static_cast<size_t>(N));
      for (auto& p : pos) p = static_cast<int32_t>(gen() % 131072);
      pos[0] = 0;
      const Pair positions = both_i32(be, pos, {N});
      const Pair inv = both(be, inverse_frequencies(HS, 1e6), {HS / 2});
      const std::vector<float> x0 = random_floats(static_cast<size_t>(N * H * HS), 8);
      const Pair x = both(be, x0, {N, H, HS}, dtype);
      be.cpu->rope_fwd(x.cpu, positions.cpu, inv.cpu);
      be.gpu->rope_fwd(x.gpu, positions.gpu, inv.gpu);
      EXPECT_TRUE(matches(be, x, tolerance(dtype))) << "fwd N " << N << " HS " << HS;
      be.cpu->rope_bwd(x.cpu, positions.cpu, inv.cpu);
      be.gpu->rope_bwd(x.gpu, positions.gpu, inv.gpu);
      EXPECT_TRUE(matches(be, x, tolerance(dtype))) << "bwd N " << N << " HS " << HS;
      if (dtype == DType::F32)
        EXPECT_TRUE(close_normalized(download(*be.gpu, x.gpu), x0, 1e-6)) << "bwd(fwd(x)) != x";
    }
}

}  // namespace
}  // namespace trlhpc::cuda_test
