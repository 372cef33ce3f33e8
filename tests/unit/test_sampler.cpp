// Deterministic distributed sampler: layout-independent global batches, epochs, resume; eval row dealing.
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/sampler.hpp"

namespace trlhpc::batching {
namespace {

SamplerConfig layout(int64_t n, int64_t per_device, int64_t dp, int64_t accumulation, bool drop_last = false) {
  return SamplerConfig{.num_rows = n,
                       .per_device_batch_size = per_device,
                       .dp = dp,
                       .gradient_accumulation_steps = accumulation,
                       .seed = 1234,
                       .shuffle = true,
                       .drop_last = drop_last};
}

// Union of every (micro-step, dp rank) slice of one step, as a sorted list (duplicates kept to catch them).
std::vector<int64_t> union_of_slices(DistributedSampler& sampler, int64_t epoch, int64_t step) {
  std::vector<int64_t> all;
  for (int64_t m = 0; m < sampler.config().gradient_accumulation_steps; ++m)
    for (int64_t r = 0; r < sampler.config().dp; ++r) {
      auto part = sampler.micro_batch(epoch, step, m, r);
      all.insert(all.end(), part.begin(), part.end());
    }
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Sampler, PermutationIsAPermutationAndDeterministic) {
  auto a = epoch_permutation(1000, 42, 0);
  auto b = epoch_permutation(1000, 42, 0);
  EXPECT_EQ(a, b);
  std::vector<int64_t> identity(1000);
  for (int64_t i = 0; i < 1000; ++i) identity[i] = i;
  EXPECT_EQ(sorted(a), identity);
  EXPECT_NE(a, identity);
  EXPECT_NE(a, epoch_permutation(1000, 42, 1));
  EXPECT_NE(a, epoch_permutation(1000, 43, 0));
  EXPECT_NE(epoch_permutation(1000, 43, 0), epoch_permutation(1000, 42, 1));
  EXPECT_EQ(epoch_permutation(0, 1, 0).size(), 0u);
  EXPECT_EQ(epoch_permutation(1, 1, 0), std::vector<int64_t>{0});
}

// A fixed value pins the generator: a change to the shuffle changes every run's data order, so make it on purpose.
TEST(Sampler, PermutationIsPinned) {
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFull);  // reference splitmix64 output for seed 0
  EXPECT_EQ(epoch_permutation(10, 42, 0), (std::vector<int64_t>{6, 7, 0, 1, 3, 2, 8, 5, 4, 9}));
  EXPECT_EQ(epoch_permutation(10, 42, 1), (std::vector<int64_t>{5, 1, 6, 3, 7, 2, 8, 4, 0, 9}));
}

// Every position lands on every index about equally often (a biased shuffle would fail this).
TEST(Sampler, PermutationIsRoughlyUniform) {
  const int n = 5, trials = 20000;
  std::vector<std::vector<int>> counts(n, std::vector<int>(n, 0));
  for (int t = 0; t < trials; ++t) {
    auto order = epoch_permutation(n, 7, t);
    for (int p = 0; p < n; ++p) ++counts[p][order[p]];
  }
  for (int p = 0; p < n; ++p)
    for (int v = 0; v < n; ++v) EXPECT_NEAR(counts[p][v], trials / n, 0.06 * trials / n) << p << "," << v;
}

TEST(Sampler, UnionOverRanksAndMicroStepsIsTheGlobalBatch) {
  DistributedSampler sampler(layout(103, 3, 4, 2, /*drop_last=*/true));
  EXPECT_EQ(sampler.global_batch_size(), 24);
  EXPECT_EQ(sampler.rows_per_epoch(), 96);  // 103 rounded down to batches of 3 x 4
  EXPECT_EQ(sampler.steps_per_epoch(), 4);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> epoch_rows;
    for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
      auto global = sampler.global_batch(epoch, step);
      EXPECT_EQ(global.size(), 24u);
      EXPECT_EQ(union_of_slices(sampler, epoch, step), sorted(global));
      for (int64_t m = 0; m < 2; ++m)
        for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(sampler.micro_batch(epoch, step, m, r).size(), 3u);
      epoch_rows.insert(global.begin(), global.end());
    }
    EXPECT_EQ(epoch_rows.size(), 96u);  // no row twice within an epoch
  }
}

TEST(Sampler, LayoutDoesNotChangeTheGlobalBatch) {
  // per_device x dp x accumulation = 8 in each layout.
  std::vector<SamplerConfig> layouts = {layout(100, 8, 1, 1), layout(100, 2, 4, 1), layout(100, 1, 4, 2),
                                        layout(100, 4, 1, 2), layout(100, 1, 8, 1), layout(100, 1, 1, 8)};
  DistributedSampler reference(layouts[0]);
  for (const auto& config : layouts) {
    DistributedSampler sampler(config);
    ASSERT_EQ(sampler.steps_per_epoch(), reference.steps_per_epoch());
    for (int64_t epoch = 0; epoch < 3; ++epoch)
      for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step)
        ASSERT_EQ(union_of_slices(sampler, epoch, step), sorted(reference.global_batch(epoch, step)))
            << "per_device " << config.per_device_batch_size << " dp " << config.dp << " accumulation "
            << config.gradient_accumulation_steps << " epoch " << epoch << " step " << step;
  }
}

TEST(Sampler, EpochsReshuffleAndShuffleOffKeepsFileOrder) {
  DistributedSampler sampler(layout(64, 4, 2, 1));
  EXPECT_NE(sampler.global_batch(0, 0), sampler.global_batch(1, 0));
  EXPECT_EQ(sorted(sampler.epoch_order(0)), sorted(sampler.epoch_order(1)));

  SamplerConfig ordered = layout(20, 2, 2, 2);
  ordered.shuffle = false;
  DistributedSampler in_order(ordered);
  EXPECT_EQ(in_order.global_batch(1, 1), (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(in_order.micro_batch(0, 1, 0, 1), (std::vector<int64_t>{10, 11}));  // sampler.cpp worked example
  EXPECT_EQ(in_order.micro_batch(0, 1, 1, 0), (std::vector<int64_t>{12, 13}));
}

TEST(Sampler, SameSeedSameOrderAcrossInstances) {
  DistributedSampler a(layout(500, 4, 2, 2)), b(layout(500, 4, 2, 2));
  for (int64_t step = 0; step < a.steps_per_epoch(); ++step)
    for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(a.micro_batch(2, step, 1, r), b.micro_batch(2, step, 1, r));
  SamplerConfig other = layout(500, 4, 2, 2);
  other.seed = 1235;
  DistributedSampler c(other);
  EXPECT_NE(a.global_batch(0, 0), c.global_batch(0, 0));
}

TEST(Sampler, ResumeFromEpochAndStepGivesTheSameRest) {
  SamplerConfig config = layout(90, 2, 3, 2);
  DistributedSampler full(config);
  const int64_t total_steps = 3 * full.steps_per_epoch();
  std::vector<std::vector<int64_t>> uninterrupted;
  for (int64_t g = 0; g < total_steps; ++g) {
    auto p = full.position(g);
    uninterrupted.push_back(full.micro_batch(p.epoch, p.step, 1, 2));
  }
  const int64_t resume_at = full.steps_per_epoch() + 3;  // inside epoch 1
  SamplerPosition saved = full.position(resume_at);
  EXPECT_EQ(saved, (SamplerPosition{1, 3}));
  DistributedSampler resumed(config);  // a fresh process
  for (int64_t g = resumed.global_step(saved); g < total_steps; ++g) {
    auto p = resumed.position(g);
    EXPECT_EQ(resumed.micro_batch(p.epoch, p.step, 1, 2), uninterrupted[g]) << "global step " << g;
  }
}

TEST(Sampler, PartialLastBatchWhenNotDropping) {
  // 21 rows, G = 8: steps 0, 1 full; step 2 has R = 5 rows over S = 4 slots -> 1, 1, 1, 2 rows.
  for (auto config : {layout(21, 2, 2, 2, false), layout(21, 1, 4, 2, false), layout(21, 8, 1, 1, false)}) {
    DistributedSampler sampler(config);
    ASSERT_EQ(sampler.steps_per_epoch(), 3);
    auto last = sampler.global_batch(0, 2);
    EXPECT_EQ(last.size(), 5u);
    EXPECT_EQ(union_of_slices(sampler, 0, 2), sorted(last));
    std::set<int64_t> everything;
    for (int64_t step = 0; step < 3; ++step) {
      auto g = sampler.global_batch(0, step);
      everything.insert(g.begin(), g.end());
    }
    EXPECT_EQ(everything.size(), 21u);  // nothing dropped
  }
  DistributedSampler tiny(layout(3, 1, 2, 2, false));  // R = 3 < S = 4: one micro-batch is empty
  int empty = 0;
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t r = 0; r < 2; ++r) empty += tiny.micro_batch(0, 0, m, r).empty();
  EXPECT_EQ(empty, 1);
}

TEST(Sampler, ErrorsNameTheSizes) {
  try {
    DistributedSampler sampler(layout(7, 4, 2, 2, /*drop_last=*/true));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("has 7 rows, fewer than one batch of 8"), std::string::npos) << message;
    EXPECT_NE(message.find("--dataloader_drop_last"), std::string::npos) << message;
  }
  EXPECT_THROW(DistributedSampler(layout(10, 0, 1, 1)), UserError);
  EXPECT_THROW(DistributedSampler(layout(10, 1, 1, 0)), UserError);
  EXPECT_NO_THROW(DistributedSampler(layout(7, 4, 2, 2)));  // kept: one partial step
}

// What transformers' Trainer does with one process whose batch is B' = per_device x dp (how trlhpc's
// layout-independent global batch maps onto HF), written out from transformers 4.57.1 trainer.py and
// torch's DataLoader, independently of sampler.cpp:
//   len_dataloader = N // B' with drop_last, else ceil(N / B')                (torch BatchSampler.__len__)
//   num_update_steps_per_epoch = len_dataloader // GA + int(len_dataloader % GA > 0)
//                                                                  (Trainer.set_initial_training_values)
//   in _inner_training_loop: remainder = len % GA (GA when 0); total_updates = len // GA + int(remainder < GA);
//   update u takes GA micro-batches (the last: remainder); after each micro-batch `step` (0-based in the
//   epoch) state.epoch = epoch + (step + 1) / steps_in_epoch, logged after the update.
struct HfEpoch {
  int64_t updates = 0;
  std::vector<int64_t> rows_per_update;
  std::vector<double> epoch_logged;  // after each update of epoch 0
};
HfEpoch hf_epoch(int64_t N, int64_t micro_rows, int64_t GA, bool drop_last) {
  const int64_t len = drop_last ? N / micro_rows : (N + micro_rows - 1) / micro_rows;
  int64_t remainder = len % GA;
  if (remainder == 0) remainder = GA;
  HfEpoch e;
  e.updates = len / GA + static_cast<int64_t>(remainder < GA);
  EXPECT_EQ(e.updates, len / GA + static_cast<int64_t>(len % GA > 0));  // the two HF formulas agree
  int64_t step = -1, row = 0;
  for (int64_t u = 0; u < e.updates; ++u) {
    const int64_t batches = u + 1 < e.updates ? GA : remainder;
    int64_t rows = 0;
    for (int64_t b = 0; b < batches; ++b) {
      ++step;
      const int64_t take = std::min(micro_rows, N - row);  // a partial micro-batch only when not dropping
      rows += take;
      row += take;
    }
    e.rows_per_update.push_back(rows);
    e.epoch_logged.push_back(static_cast<double>(step + 1) / static_cast<double>(len));
  }
  return e;
}

TEST(Sampler, StepsRowsAndEpochsAreHuggingFacesWithAndWithoutDropLast) {
  for (bool drop_last : {false, true})
    for (int64_t N : {1, 7, 20, 21, 22, 97, 100})
      for (auto [per_device, dp, GA] : {std::tuple{1, 1, 1}, {2, 2, 2}, {3, 1, 4}, {1, 4, 3}, {8, 1, 1}, {2, 1, 5}}) {
        SCOPED_TRACE("N " + std::to_string(N) + " per_device " + std::to_string(per_device) + " dp " +
                     std::to_string(dp) + " GA " + std::to_string(GA) + (drop_last ? " drop_last" : ""));
        if (drop_last && N < per_device * dp) {
          EXPECT_THROW(DistributedSampler(layout(N, per_device, dp, GA, true)), UserError);
          continue;
        }
        DistributedSampler sampler(layout(N, per_device, dp, GA, drop_last));
        const HfEpoch hf = hf_epoch(N, per_device * dp, GA, drop_last);
        ASSERT_EQ(sampler.steps_per_epoch(), hf.updates);
        std::set<int64_t> seen;
        for (int64_t u = 0; u < hf.updates; ++u) {
          const std::vector<int64_t> rows = union_of_slices(sampler, 0, u);
          EXPECT_EQ(static_cast<int64_t>(rows.size()), hf.rows_per_update[static_cast<size_t>(u)]) << "update " << u;
          seen.insert(rows.begin(), rows.end());
          EXPECT_DOUBLE_EQ(sampler.epoch_after(u), hf.epoch_logged[static_cast<size_t>(u)]) << "update " << u;
          EXPECT_DOUBLE_EQ(sampler.epoch_after(hf.updates + u), 1.0 + hf.epoch_logged[static_cast<size_t>(u)]);
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), sampler.rows_per_epoch());  // no row twice
        EXPECT_EQ(sampler.rows_per_epoch(), drop_last ? N / (per_device * dp) * (per_device * dp) : N);
      }
}

// Eval dealing against a brute-force enumeration: walk every row, hand it to rank row % dp, and start a
// new micro-batch on that rank whenever its current one is full.
TEST(Sampler, EvalMicroBatchesMatchBruteForce) {
  for (int64_t rows : {0, 1, 2, 3, 5, 7, 8, 16, 17, 100})
    for (int64_t dp : {1, 2, 3, 4, 8})
      for (int64_t batch : {1, 2, 3, 5, 64}) {
        std::vector<std::vector<std::vector<int64_t>>> want(static_cast<size_t>(dp));
        for (int64_t row = 0; row < rows; ++row) {
          auto& batches = want[static_cast<size_t>(row % dp)];
          if (batches.empty() || static_cast<int64_t>(batches.back().size()) == batch) batches.emplace_back();
          batches.back().push_back(row);
        }
        int64_t want_count = 0;
        for (const auto& batches : want) want_count = std::max(want_count, static_cast<int64_t>(batches.size()));

        std::vector<int64_t> every_row;
        for (int64_t rank = 0; rank < dp; ++rank) {
          const EvalPlan plan = eval_micro_batches(rows, dp, rank, batch);
          SCOPED_TRACE("rows " + std::to_string(rows) + " dp " + std::to_string(dp) + " batch " +
                       std::to_string(batch) + " rank " + std::to_string(rank));
          EXPECT_EQ(plan.micro_batches, want[static_cast<size_t>(rank)]);
          EXPECT_EQ(plan.micro_batch_count, want_count);
          EXPECT_LE(static_cast<int64_t>(plan.micro_batches.size()), plan.micro_batch_count);
          for (const auto& micro : plan.micro_batches) every_row.insert(every_row.end(), micro.begin(), micro.end());
        }
        std::sort(every_row.begin(), every_row.end());
        std::vector<int64_t> all(static_cast<size_t>(rows));
        std::iota(all.begin(), all.end(), 0);
        EXPECT_EQ(every_row, all) << "rows " << rows << " dp " << dp << " batch " << batch;  // each row once
      }
}

TEST(Sampler, EvalMicroBatchesWorkedExamples) {
  // The example of sampler.hpp: 5 rows, dp 2, batch 2.
  EXPECT_EQ(eval_micro_batches(5, 2, 0, 2).micro_batches, (std::vector<std::vector<int64_t>>{{0, 2}, {4}}));
  EXPECT_EQ(eval_micro_batches(5, 2, 1, 2).micro_batches, (std::vector<std::vector<int64_t>>{{1, 3}}));
  EXPECT_EQ(eval_micro_batches(5, 2, 1, 2).micro_batch_count, 2);
  // Fewer rows than ranks: the ranks without a row still run rank 0's one forward, padded.
  const EvalPlan idle = eval_micro_batches(2, 4, 3, 8);
  EXPECT_TRUE(idle.micro_batches.empty());
  EXPECT_EQ(idle.micro_batch_count, 1);
  // No rows: nothing to run anywhere.
  EXPECT_EQ(eval_micro_batches(0, 4, 0, 8).micro_batch_count, 0);
}

TEST(Sampler, EvalMicroBatchesRejectBadSizes) {
  EXPECT_THROW(eval_micro_batches(10, 0, 0, 1), UserError);
  EXPECT_THROW(eval_micro_batches(10, 2, 2, 1), UserError);
  EXPECT_THROW(eval_micro_batches(10, 2, -1, 1), UserError);
  EXPECT_THROW(eval_micro_batches(10, 2, 0, 0), UserError);
  EXPECT_THROW(eval_micro_batches(-1, 2, 0, 1), UserError);
}

}  // namespace
}  // namespace trlhpc::batching
