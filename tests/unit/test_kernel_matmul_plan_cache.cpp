// The CUDA matmul's plan bookkeeping (trlhpc/kernels/matmul_plan_cache.hpp) on the CPU: row-count
// buckets and the bounded plan cache (docs/CUDA-REVIEW-FIXES.md defect 7: a cache keyed by exact M grew without
// bound under variable-length packing).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "trlhpc/kernels/matmul_plan_cache.hpp"

namespace trlhpc {
namespace {

using kernels::BoundedLru;
using kernels::matmul_rows_bucket;

TEST(KernelMatmulPlanCache, RowBucketsAreFewAndTight) {
  EXPECT_EQ(matmul_rows_bucket(1), 1);
  EXPECT_EQ(matmul_rows_bucket(64), 64);
  EXPECT_EQ(matmul_rows_bucket(100), 112);
  EXPECT_EQ(matmul_rows_bucket(1000), 1024);
  EXPECT_EQ(matmul_rows_bucket(5000), 5120);
  std::set<int64_t> buckets;
  int64_t previous = 0;
  for (int64_t M = 1; M <= 65536; ++M) {  // every packed-row token count up to 64K
    const int64_t b = matmul_rows_bucket(M);
    EXPECT_GE(b, M);
    EXPECT_GE(b, previous);
    if (M > 64) EXPECT_LE(b, M + M / 4 + 1) << M;
    buckets.insert(b);
    previous = b;
  }
  EXPECT_LE(buckets.size(), 64u + 4u * 10u) << "exact up to 64, then 4 per octave";
}

TEST(KernelMatmulPlanCache, LruStaysBoundedAndKeepsRecentPlans) {
  BoundedLru<int64_t, std::string> cache(3);
  cache.insert(1, "a");
  cache.insert(2, "b");
  cache.insert(3, "c");
  ASSERT_NE(cache.find(1), nullptr);  // 1 becomes the most recent: 2 is the oldest now
  cache.insert(4, "d");
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(*cache.find(1), "a");
  EXPECT_EQ(*cache.find(4), "d");
  EXPECT_EQ(cache.evictions(), 1);
  for (int64_t M = 100; M < 10100; ++M) cache.insert(M, "x");  // a long run of distinct row counts
  EXPECT_EQ(cache.size(), 3u);
  cache.insert(10099, "y");  // replacing does not evict
  EXPECT_EQ(*cache.find(10099), "y");
  EXPECT_EQ(cache.size(), 3u);
}

}  // namespace
}  // namespace trlhpc
