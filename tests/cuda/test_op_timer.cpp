// OpTimer (kernels/cuda/op_timer.cuh): nested scopes, and a fold of the pending events (totals())
// while a scope is open, which crashed when scopes held an index into the pending list
// (docs/CUDA-REVIEW-FIXES.md defect 9).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cuda_test_util.hpp"
#include "op_timer.cuh"

namespace trlhpc::cuda_test {
namespace {

std::map<std::string, int64_t> calls_by_name(const std::vector<OpTiming>& totals) {
  std::map<std::string, int64_t> out;
  for (const OpTiming& t : totals) out[t.name] = t.calls;
  return out;
}

TEST(CudaOpTimer, NestedScopesSurviveAFoldInside) {
  TRLHPC_REQUIRE_GPU();
  TRLHPC_CHECK_CUDA(cudaSetDevice(0));
  cuda::CudaStream stream;
  cuda::OpTimer timer(true);
  {
    auto outer = timer.scope("outer", stream.get());
    { auto inner = timer.scope("inner", stream.get()); }
    EXPECT_EQ(calls_by_name(timer.totals())["inner"], 1) << "the closed inner scope is folded in";
    { auto second = timer.scope("inner", stream.get()); }
  }  // closes after the fold: must record into its own events
  const std::map<std::string, int64_t> calls = calls_by_name(timer.totals());
  EXPECT_EQ(calls.at("outer"), 1);
  EXPECT_EQ(calls.at("inner"), 2);
  for (const OpTiming& t : timer.totals()) EXPECT_GE(t.milliseconds, 0.0) << t.name;
}

TEST(CudaOpTimer, DisabledTimerRecordsNothing) {
  TRLHPC_REQUIRE_GPU();
  cuda::CudaStream stream;
  cuda::OpTimer timer(false);
  { auto s = timer.scope("x", stream.get()); }
  EXPECT_TRUE(timer.totals().empty());
}

}  // namespace
}  // namespace trlhpc::cuda_test
