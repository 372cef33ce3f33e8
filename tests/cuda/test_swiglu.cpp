// CUDA SwiGLU forward/backward against the CPU backend, fp32 and bf16, including large |gate|.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

TEST(CudaSwiglu, ForwardAndBackwardMatchCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (int64_t n : {1, 1001, 4096 * 64})
    for (DType dtype : {DType::F32, DType::BF16}) {
      std::vector<float> g = random_floats(static_cast<size_t>(n), 1, 10.0f);
      g[0] = n > 1 ? 90.0f : g[0];
      const Pair gate = both(be, g, {n}, dtype), up = both(be, random_floats(static_cast<size_t>(n), 2), {n}, dtype);
      const Pair out = both_poisoned(be, {n}, dtype);
      be.cpu->swiglu_fwd(gate.cpu, up.cpu, out.cpu);
      be.gpu->swiglu_fwd(gate.gpu, up.gpu, out.gpu);
      EXPECT_TRUE(matches(be, out, tolerance(dtype))) << "fwd n " << n;
      const Pair dout = both(be, random_floats(static_cast<size_t>(n), 3), {n}, dtype);
      const Pair dgate = both_poisoned(be, {n}, dtype), dup = both_poisoned(be, {n}, dtype);
      be.cpu->swiglu_bwd(gate.cpu, up.cpu, dout.cpu, dgate.cpu, dup.cpu);
      be.gpu->swiglu_bwd(gate.gpu, up.gpu, dout.gpu, dgate.gpu, dup.gpu);
      EXPECT_TRUE(matches(be, dgate, tolerance(dtype))) << "dgate n " << n;
      EXPECT_TRUE(matches(be, dup, tolerance(dtype))) << "dup n " << n;
    }
}

}  // namespace
}  // namespace trlhpc::cuda_test
