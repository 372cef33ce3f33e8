// The plan of a `trlhpc sft` run (train/sft_plan.hpp) and the metrics window of its loop
// (train/metrics_window.hpp): pure functions of the configuration and of the steps, checked without MPI.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/train/metrics_window.hpp"
#include "trlhpc/train/sft_plan.hpp"

namespace trlhpc {
namespace {

SftConfig llama_tiny_job() {
  SftConfig c;
  c.model_name_or_path = testing::tests_dir() + "/golden/llama_tiny/model";  // 4 heads, 1 kv head
  c.dataset_name = "rows.jsonl";
  c.output_dir = "out/run";
  c.max_length = 32;
  return c;
}

std::string plan_error(const SftConfig& c, int world) {
  try {
    plan_sft_job(c, world);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(SftPlan, ResolvesTheMeshForTheModel) {
  SftConfig c = llama_tiny_job();
  c.tp_size = 2;
  const SftPlan plan = plan_sft_job(c, 4);
  EXPECT_EQ(plan.dims.tp, 2);
  EXPECT_EQ(plan.dims.dp_shard, 2);           // -1: the rest of the 4 ranks
  EXPECT_EQ(plan.dims.kv_share, 2);           // one kv head over tp 2: both tp ranks hold it
  EXPECT_EQ(plan.model.num_key_value_heads, 1);
  EXPECT_EQ(plan.tokenizer_dir, c.model_name_or_path);
  EXPECT_EQ(plan.cache_dir, "out/run/.dataset_cache");
  c.tokenizer = "tok";
  c.dataset_cache_dir = "none";
  c.tp_size = 1;
  const SftPlan other = plan_sft_job(c, 4);
  EXPECT_EQ(other.dims.kv_share, 1);
  EXPECT_EQ(other.tokenizer_dir, "tok");
  EXPECT_EQ(other.cache_dir, "none");
}

TEST(SftPlan, CarriesTheTrainerOptions) {
  SftConfig c = llama_tiny_job();
  c.sharding = "zero3";
  c.bucket_size_mb = 2;
  c.gradient_checkpointing = true;
  c.loss_chunk_tokens = 77;
  c.weight_decay = 0.25;
  c.max_grad_norm = 0.5;
  c.lr_scheduler_type = "cosine";
  const SftPlan plan = plan_sft_job(c, 1);
  EXPECT_EQ(plan.trainer.parallel.data_parallel.sharding, ShardingKind::Zero3);
  EXPECT_EQ(plan.trainer.parallel.data_parallel.bucket_elements, 2 * 1024 * 1024 / 4);
  EXPECT_TRUE(plan.trainer.parallel.gradient_checkpointing);
  EXPECT_EQ(plan.trainer.parallel.loss_chunk_tokens, 77);
  EXPECT_FLOAT_EQ(plan.trainer.adamw.weight_decay, 0.25f);
  EXPECT_DOUBLE_EQ(plan.trainer.max_grad_norm, 0.5);
  EXPECT_EQ(plan.schedule, LrSchedule::Cosine);
}

TEST(SftPlan, BadOptionsAreUserErrorsInTheOrderTheyAreChecked) {
  SftConfig c = llama_tiny_job();
  c.tp_size = 3;  // 4 heads do not split over 3
  EXPECT_NE(plan_error(c, 3).find("tp_size 3"), std::string::npos) << plan_error(c, 3);
  c.tp_size = 1;
  c.cp_size = 3;  // 32 tokens do not split into 6 zigzag chunks
  EXPECT_NE(plan_error(c, 3).find("--max_length 32"), std::string::npos) << plan_error(c, 3);
  // The world size is checked before the model is read.
  c.cp_size = 2;
  c.model_name_or_path = "/nonexistent";
  EXPECT_NE(plan_error(c, 3).find("world size 3"), std::string::npos) << plan_error(c, 3);
  c = llama_tiny_job();
  c.dataset_name.clear();
  EXPECT_NE(plan_error(c, 1).find("--dataset_name"), std::string::npos);
  c = llama_tiny_job();
  c.lr_scheduler_type = "sawtooth";
  EXPECT_NE(plan_error(c, 1).find("--lr_scheduler_type"), std::string::npos) << plan_error(c, 1);
}

TEST(MetricsWindow, ReportsTheStepsSinceTheLastLine) {
  MetricsWindow w;
  EXPECT_TRUE(w.empty());
  w.add(2.0, 100, 0.5, 1e9);
  w.add(1.0, 300, 1.5, 3e9);
  EXPECT_FALSE(w.empty());
  EXPECT_DOUBLE_EQ(w.mean_loss(), 1.5);
  EXPECT_DOUBLE_EQ(w.tokens_per_second(), 200.0);    // 400 tokens in 2 s
  EXPECT_DOUBLE_EQ(w.mfu(1e9, 4), 0.5);              // 2e9 FLOP/s of 4e9
  w.clear();
  EXPECT_TRUE(w.empty());
  w.add(3.0, 10, 1.0, 0);
  EXPECT_DOUBLE_EQ(w.mean_loss(), 3.0);
}

}  // namespace
}  // namespace trlhpc
