// TokenSampler against transformers' definitions, recomputed here independently by brute force:
// greedy is the first maximal index; top-k keeps every logit >= the k-th largest (ties kept); top-p
// drops a token iff the probability of it and of every less probable token sums to <= 1 - top_p (never
// the most probable one); temperature divides the logits first. Sampling frequencies match the
// filtered softmax over many draws.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/generate/token_sampler.hpp"

namespace trlhpc {
namespace {

TEST(TokenSampler, GreedyIsTheFirstMaximum) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(argmax_token(logits), 1);
  TokenSampler greedy(SamplingOptions{});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(greedy.next(logits), 1);
}

TEST(TokenSampler, TopKKeepsTiesWithTheKth) {
  const std::vector<float> logits = {3, 1, 2, 2, 0, 5};
  SamplingOptions o;
  o.do_sample = true, o.top_k = 3, o.temperature = 2.0;
  const std::vector<float> got = filtered_logits(logits, o);
  // Sorted descending: 5, 3, 2, 2, ... the 3rd is 2: both 2s stay.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {1.5f, -inf, 1.0f, 1.0f, -inf, 2.5f};
  EXPECT_EQ(got, want);
}

TEST(TokenSampler, TopPAsTransformersDefinesIt) {
  const std::vector<float> logits = testing::random_floats(40, 7, 3.0f);
  for (double top_p : {0.05, 0.3, 0.5, 0.9, 0.999}) {
    SamplingOptions o;
    o.do_sample = true, o.top_k = 0, o.top_p = top_p;
    const std::vector<float> got = filtered_logits(logits, o);
    double z = 0;
    for (float v : logits) z += std::exp(static_cast<double>(v));
    int kept = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      double tail = 0;  // probability of token i and every less probable token
      for (float v : logits)
        if (v <= logits[i]) tail += std::exp(static_cast<double>(v)) / z;
      const bool is_max = logits[i] == *std::max_element(logits.begin(), logits.end());
      const bool dropped = tail <= 1.0 - top_p && !is_max;
      EXPECT_EQ(std::isinf(got[i]), dropped) << "top_p " << top_p << " token " << i << " tail " << tail;
      kept += !std::isinf(got[i]);
    }
    EXPECT_GE(kept, 1);
  }
}

TEST(TokenSampler, DrawsFollowTheFilteredSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  SamplingOptions o;
  o.do_sample = true, o.top_k = 4, o.temperature = 0.7, o.seed = 3;
  TokenSampler sampler(o);
  std::map<int32_t, int> counts;
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) ++counts[sampler.next(logits)];
  EXPECT_EQ(counts.count(3), 0u);  // -1 is below the 4th largest (0)
  double z = 0;
  for (int i : {0, 1, 2, 4}) z += std::exp(logits[static_cast<size_t>(i)] / 0.7);
  for (int i : {0, 1, 2, 4}) {
    const double p = std::exp(logits[static_cast<size_t>(i)] / 0.7) / z;
    const double sigma = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(counts[i] / static_cast<double>(draws), p, 5 * sigma) << "token " << i;
  }
  // The same seed repeats the same draws.
  TokenSampler again(o), other(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(again.next(logits), other.next(logits));
}

TEST(TokenSampler, OutOfRangeOptionsAreUserErrors) {
  SamplingOptions o;
  o.do_sample = true;
  o.temperature = 0;
  EXPECT_THROW(TokenSampler{o}, UserError);
  o.temperature = 1, o.top_p = 0;
  EXPECT_THROW(TokenSampler{o}, UserError);
  o.top_p = 1, o.top_k = -1;
  EXPECT_THROW(TokenSampler{o}, UserError);
}

}  // namespace
}  // namespace trlhpc
