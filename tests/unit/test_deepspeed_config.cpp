// --deepspeed FILE.json (cli/deepspeed_config.hpp): a DeepSpeed config onto trlhpc's strategies, through
// the same rules as --accelerate_config; flags given explicitly win, or contradict by name.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

std::string ds_file(const std::string& json) {
  const std::string path = testing::make_temp_dir("deepspeed") + "/ds.json";
  std::ofstream(path) << json;
  return path;
}

SftConfig parsed(std::vector<std::string> args, std::vector<std::string>* notes = nullptr) {
  SftConfig config;
  SftOptionContext context{2, false};
  context.notes = notes;
  EXPECT_TRUE(parse_sft_options(args, config, nullptr, context));
  return config;
}

std::string error_of(const std::vector<std::string>& args) {
  SftConfig config;
  return testing::user_error([&] { parse_sft_options(args, config, nullptr, SftOptionContext{2, false}); });
}

TEST(DeepSpeedConfig, ZeroStageAndOffloadBecomeTheStrategy) {
  EXPECT_EQ(parsed({"--deepspeed", ds_file(R"({"zero_optimization": {"stage": 2}})")}).sharding, "zero2");
  EXPECT_EQ(parsed({"--deepspeed", ds_file(R"({"train_batch_size": "auto"})")}).sharding, "none");
  const SftConfig c = parsed({"--deepspeed", ds_file(R"({"zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu", "pin_memory": true}, "offload_param": {"device": "cpu"}}})")});
  EXPECT_EQ(c.sharding, "zero3");
  EXPECT_EQ(c.offload, "parameters");
  EXPECT_EQ(parsed({"--sharding", "zero1", "--deepspeed", ds_file(R"({"zero_optimization": {"stage": 3}})")}).sharding,
            "zero1");  // the flag wins, as over --accelerate_config
}

TEST(DeepSpeedConfig, PrecisionBatchAndClipping) {
  const std::string ds = ds_file(R"({"bf16": {"enabled": true}, "gradient_accumulation_steps": 4,
      "train_micro_batch_size_per_gpu": 3, "gradient_clipping": 0.5, "optimizer": {"type": "AdamW"}})");
  std::vector<std::string> notes;
  const SftConfig c = parsed({"--deepspeed", ds}, &notes);
  EXPECT_TRUE(c.bf16);
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.per_device_train_batch_size, 3);
  EXPECT_DOUBLE_EQ(c.max_grad_norm, 0.5);
  bool optimizer_note = false;
  for (const std::string& n : notes) optimizer_note |= n.find("optimizer ignored") != std::string::npos;
  EXPECT_TRUE(optimizer_note);
  EXPECT_FALSE(parsed({"--deepspeed", ds, "--bf16", "false"}).bf16);
  const std::string autos = ds_file(R"({"bf16": {"enabled": "auto"}, "gradient_accumulation_steps": "auto"})");
  EXPECT_FALSE(parsed({"--deepspeed", autos}).bf16);
  EXPECT_EQ(parsed({"--deepspeed", autos, "--gradient_accumulation_steps", "2"}).gradient_accumulation_steps, 2);
  EXPECT_EQ(parsed({"--deepspeed", ds, "--gradient_accumulation_steps", "4"}).gradient_accumulation_steps, 4);
}

TEST(DeepSpeedConfig, ContradictionsAndUnsupportedSettingsAreRefusedByName) {
  const std::string ds = ds_file(R"({"gradient_accumulation_steps": 4})");
  std::string e = error_of({"--deepspeed", ds, "--gradient_accumulation_steps", "2"});
  EXPECT_NE(e.find("gradient_accumulation_steps 4 contradicts --gradient_accumulation_steps 2"), std::string::npos) << e;
  e = error_of({"--deepspeed", ds_file(R"({"fp16": {"enabled": true}})")});
  EXPECT_NE(e.find("fp16.enabled true is not supported"), std::string::npos) << e;
  e = error_of({"--deepspeed", ds_file(R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})")});
  EXPECT_NE(e.find("offload_param_device cpu needs zero_stage 3"), std::string::npos) << e;
  e = error_of({"--deepspeed", ds_file(R"({"zero_optimization": {"stage": 5}})")});
  EXPECT_NE(e.find("zero_stage 5 does not exist"), std::string::npos) << e;
  e = error_of({"--deepspeed", ds, "--accelerate_config", "zero2"});
  EXPECT_NE(e.find("--accelerate_config zero2 both choose"), std::string::npos) << e;
  e = error_of({"--deepspeed", "/no/such/ds.json"});
  EXPECT_NE(e.find("--deepspeed /no/such/ds.json: file not found"), std::string::npos) << e;
  e = error_of({"--deepspeed", ds_file("[1, 2]")});
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;
}

TEST(DeepSpeedConfig, InlineObjectFromAYamlConfig) {
  const std::string yaml = testing::make_temp_dir("deepspeed") + "/run.yaml";
  std::ofstream(yaml) << "deepspeed: {zero_optimization: {stage: 1}}\n";
  EXPECT_EQ(parsed({"--config", yaml}).sharding, "zero1");
  EXPECT_EQ(parsed({"--deepspeed", "null"}).sharding, "none");  // TRL's None
}

}  // namespace
}  // namespace trlhpc
