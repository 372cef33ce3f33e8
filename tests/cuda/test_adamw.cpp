// CUDA AdamW against the CPU kernel over several steps (both lerp branches, with and without weight
// decay), the multi-tensor launch over more tensors than one launch holds, and the bf16 compute copy
// of mixed precision that the same pass writes.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

TEST(CudaAdamW, MatchesCpuOverSteps) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (int64_t n : {1, 1000, 300001}) {
    const Pair p = both(be, random_floats(static_cast<size_t>(n), 1), {n});
    const Pair m = both(be, std::vector<float>(static_cast<size_t>(n), 0.0f), {n});
    const Pair v = both(be, std::vector<float>(static_cast<size_t>(n), 0.0f), {n});
    for (int64_t step = 1; step <= 3; ++step) {
      const Pair g = both(be, random_floats(static_cast<size_t>(n), 10 + static_cast<uint64_t>(step), 0.1f), {n});
      const AdamWHyper h{1e-3f * static_cast<float>(step), step == 2 ? 0.3f : 0.9f, 0.999f, 1e-8f,
                         step == 3 ? 0.0f : 0.01f, step};
      be.cpu->adamw_step(p.cpu, g.cpu, m.cpu, v.cpu, h, Tensor());
      be.gpu->adamw_step(p.gpu, g.gpu, m.gpu, v.gpu, h, Tensor());
      EXPECT_TRUE(matches(be, p, 1e-7)) << "param n " << n << " step " << step;
      EXPECT_TRUE(matches(be, m, 1e-7)) << "exp_avg n " << n << " step " << step;
      EXPECT_TRUE(matches(be, v, 1e-7)) << "exp_avg_sq n " << n << " step " << step;
    }
  }
}

TEST(CudaAdamW, ManyTensorsInOneCall) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  // 40 segments of one flat buffer (more than one launch holds), odd sizes, alternating weight decay.
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + (i * 7919) % 5000), total += sizes.back();
  const Pair p = both(be, random_floats(static_cast<size_t>(total), 2), {total});
  const Pair g = both(be, random_floats(static_cast<size_t>(total), 3, 0.1f), {total});
  const Pair m = both(be, random_floats(static_cast<size_t>(total), 4, 0.01f), {total});
  std::vector<float> v_host = random_floats(static_cast<size_t>(total), 5, 0.01f);
  for (float& x : v_host) x *= x;  // exp_avg_sq is non-negative
  const Pair v2 = both(be, v_host, {total});
  std::vector<AdamWSegment> segments;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    const AdamWHyper h{2e-3f, 0.9f, 0.95f, 1e-8f, i % 2 ? 0.1f : 0.0f, 7};
    be.cpu->adamw_step(p.cpu.view({n}, offset), g.cpu.view({n}, offset), m.cpu.view({n}, offset),
                       v2.cpu.view({n}, offset), h, Tensor());
    segments.push_back(AdamWSegment{p.gpu.view({n}, offset), g.gpu.view({n}, offset), m.gpu.view({n}, offset),
                                    v2.gpu.view({n}, offset), h});
    offset += n;
  }
  be.gpu->adamw_step_many(segments);
  EXPECT_TRUE(matches(be, p, 1e-7));
  EXPECT_TRUE(matches(be, m, 1e-7));
  EXPECT_TRUE(matches(be, v2, 1e-7));
}

// The --bf16 compute copy written in the optimizer's pass (AdamWSegment::compute): equal to bf16 of the
// updated master, bit for bit; a segment without one leaves the copy's memory alone.
TEST(CudaAdamW, ComputeCopyFollowsTheMaster) {
  TRLHPC_REQUIRE_GPU();
  CudaOpsOptions options;
  options.compute_dtype = DType::BF16;
  std::unique_ptr<CudaOps> gpu = make_cuda_backend(0, options);
  const int64_t n = 10000, with_copy = 7000;  // elements [0, 7000) have a copy, [7000, n) not
  const Tensor flat = upload(*gpu, random_floats(n, 1), {n});
  const Tensor copy = gpu->zeros({n}, DType::BF16);
  const Tensor g = upload(*gpu, random_floats(n, 2, 0.5f), {n});
  const Tensor m = upload(*gpu, std::vector<float>(n, 0.0f), {n}), v = upload(*gpu, std::vector<float>(n, 0.0f), {n});
  const AdamWHyper h{0.05f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  gpu->adamw_step_many({AdamWSegment{flat.view({3000}), g.view({3000}), m.view({3000}), v.view({3000}), h,
                                     copy.view({3000})},
                        AdamWSegment{flat.view({4000}, 3000), g.view({4000}, 3000), m.view({4000}, 3000),
                                     v.view({4000}, 3000), h, copy.view({4000}, 3000)},
                        AdamWSegment{flat.view({n - with_copy}, with_copy), g.view({n - with_copy}, with_copy),
                                     m.view({n - with_copy}, with_copy), v.view({n - with_copy}, with_copy), h,
                                     Tensor()}});
  gpu->adamw_step(flat.view({with_copy}), g.view({with_copy}), m.view({with_copy}), v.view({with_copy}),
                  AdamWHyper{0.05f, 0.9f, 0.999f, 1e-8f, 0.0f, 2}, copy.view({with_copy}));
  const std::vector<float> master = download(*gpu, flat), got = download(*gpu, copy);
  for (int64_t i = 0; i < n; ++i) {
    const float want = i < with_copy ? math::round_to_bf16(master[static_cast<size_t>(i)]) : 0.0f;
    ASSERT_EQ(got[static_cast<size_t>(i)], want) << "element " << i;
  }
}

}  // namespace
}  // namespace trlhpc::cuda_test
