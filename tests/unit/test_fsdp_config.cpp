// --fsdp / --fsdp_config (cli/fsdp_config.hpp): TrainingArguments' FSDP fields onto the strategies the
// accelerate reader gives an accelerate FSDP file, with transformers 5.25's semantics (FSDP2 by default:
// the hybrid and no_shard strategies need version 1; keys with or without fsdp_; --fsdp words split on
// spaces); contradictions with --accelerate_config, --deepspeed and explicit mesh flags are refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = testing::make_temp_dir("fsdp_config") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

SftConfig parsed(std::vector<std::string> args, int world = 2, std::vector<std::string>* notes = nullptr) {
  SftConfig config;
  SftOptionContext context{world, false};
  context.notes = notes;
  EXPECT_TRUE(parse_sft_options(args, config, nullptr, context));
  return config;
}

std::string error_of(const std::vector<std::string>& args, int world = 2) {
  SftConfig config;
  return testing::user_error([&] { parse_sft_options(args, config, nullptr, SftOptionContext{world, false}); });
}

// The fields of a mapped config that a strategy decides.
std::string strategy(const SftConfig& c) {
  return c.sharding + "/" + c.offload + "/" + (c.gradient_checkpointing ? "ac" : "-") + "/" +
         std::to_string(c.dp_replicate_size) + "x" + std::to_string(c.dp_shard_size);
}

TEST(FsdpConfig, FsdpWordsBecomeTheAccelerateStrategies) {
  EXPECT_EQ(strategy(parsed({"--fsdp", "full_shard auto_wrap"})), "zero3/none/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp"})), "zero3/none/-/1x-1");  // bare --fsdp: FSDP2, reshard_after_forward true
  EXPECT_EQ(strategy(parsed({"--fsdp", "shard_grad_op"})), "zero2/none/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp", "FULL_SHARD offload"})), "zero3/parameters/-/1x-1");
  const std::string v1 = R"({"fsdp_version": 1})";
  EXPECT_EQ(strategy(parsed({"--fsdp", "no_shard", "--fsdp_config", v1})), "none/none/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp", "hybrid_shard", "--fsdp_config", v1})), "zero3/none/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp", "hybrid_shard_zero2", "--fsdp_config", v1, "--dp_replicate_size", "2"}, 4)),
            "zero2/none/-/2x-1");
  // Off: TRL's defaults and false leave everything as it was.
  for (const char* off : {"null", "", "[]", "false"}) EXPECT_EQ(strategy(parsed({"--fsdp", off})), "none/none/-/1x-1") << off;
}

TEST(FsdpConfig, SameStrategyAsTheAccelerateProfiles) {
  // The fsdp2 profile also sets mixed_precision bf16; the strategy fields are what must agree.
  EXPECT_EQ(strategy(parsed({"--fsdp", "full_shard auto_wrap"})), strategy(parsed({"--accelerate_config", "fsdp2"})));
  EXPECT_EQ(strategy(parsed({"--fsdp", "full_shard", "--fsdp_config", R"({"version": 1})"})),
            strategy(parsed({"--accelerate_config", "fsdp1"})));
  // ... and together they agree, the file's mesh and precision kept.
  const SftConfig both = parsed({"--fsdp", "full_shard auto_wrap", "--accelerate_config", "fsdp2"});
  EXPECT_EQ(both.sharding, "zero3");
  EXPECT_TRUE(both.bf16);
}

TEST(FsdpConfig, FsdpConfigKeysWithAndWithoutThePrefix) {
  const std::string file = temp_file("fsdp.json", R"({"fsdp_version": 2, "reshard_after_forward": false,
      "fsdp_activation_checkpointing": true, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
      "transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"], "min_num_params": 0, "state_dict_type": "FULL_STATE_DICT",
      "cpu_ram_efficient_loading": true, "xla": false, "xla_fsdp_grad_ckpt": false, "fsdp_use_orig_params": true,
      "sync_module_states": true, "forward_prefetch": false, "backward_prefetch": "backward_pre", "limit_all_gathers": true})");
  EXPECT_EQ(strategy(parsed({"--fsdp", "true", "--fsdp_config", file, "--gradient_checkpointing", "false"})),
            "zero2/none/ac/1x-1");  // FSDP's activation checkpointing runs whatever --gradient_checkpointing says
  EXPECT_EQ(strategy(parsed({"--fsdp", "--fsdp_config", R"({"fsdp_offload_params": true})"})), "zero3/parameters/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp", "--fsdp_config", R"({"cpu_offload": "True"})"})), "zero3/parameters/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--fsdp", "--fsdp_config", R"({"version": 1, "reshard_after_forward": "SHARD_GRAD_OP"})"})),
            "zero2/none/-/1x-1");
  std::vector<std::string> notes;
  parsed({"--fsdp", "full_shard", "--fsdp_config", R"({"fsdp_new_knob": 3})"}, 2, &notes);
  bool unknown = false, mapped = false;
  for (const std::string& n : notes) {
    unknown |= n.find("new_knob: unknown key ignored") != std::string::npos;
    mapped |= n.find("FSDP2 FULL_SHARD -> --sharding zero3") != std::string::npos;
  }
  EXPECT_TRUE(unknown);
  EXPECT_TRUE(mapped);
}

TEST(FsdpConfig, FromAConfigYaml) {
  const std::string yaml = temp_file("run.yaml", "fsdp: [full_shard, offload, auto_wrap]\nfsdp_config: {fsdp_version: 2}\n");
  EXPECT_EQ(strategy(parsed({"--config", yaml})), "zero3/parameters/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--config", temp_file("s.yaml", "fsdp: shard_grad_op auto_wrap\n")})), "zero2/none/-/1x-1");
  EXPECT_EQ(strategy(parsed({"--config", temp_file("n.yaml", "fsdp: null\nfsdp_config: null\n")})), "none/none/-/1x-1");
  const std::string e = error_of({"--config", temp_file("bad.yaml", "max_steps: 2\nfsdp: [full_shard, everything]\n")});
  EXPECT_NE(e.find("bad.yaml:2: --fsdp"), std::string::npos) << e;  // the file and line
  EXPECT_NE(e.find("unknown FSDP option 'everything'"), std::string::npos) << e;
}

TEST(FsdpConfig, NoOpKeysWithOtherValuesAreRefusedByName) {
  auto refused = [](const std::string& json, const std::string& expected) {
    const std::string e = error_of({"--fsdp", "full_shard", "--fsdp_config", json});
    EXPECT_NE(e.find(expected), std::string::npos) << json << " -> " << e;
  };
  refused(R"({"auto_wrap_policy": "SIZE_BASED_WRAP"})", "auto_wrap_policy \"SIZE_BASED_WRAP\" is not supported: trlhpc shards");
  refused(R"({"fsdp_state_dict_type": "SHARDED_STATE_DICT"})", "use FULL_STATE_DICT");
  refused(R"({"xla": true})", "xla true is not supported");
  refused(R"({"transformer_layer_cls_to_wrap": "MLP"})", "name the model's decoder layer class");
  refused(R"({"backward_prefetch": "ALWAYS"})", "use BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
  refused(R"({"version": 3})", "version 3 does not exist");
  refused(R"({"reshard_after_forward": true, "fsdp_reshard_after_forward": true})", "given twice");
  refused(R"({"reshard_after_forward": false})", "disagree");  // full_shard vs false
  refused(R"({"forward_prefetch": "sometimes"})", "forward_prefetch must be true or false");
}

TEST(FsdpConfig, TransformersRefusalsAndOffloadRules) {
  std::string e = error_of({"--fsdp", "hybrid_shard"});
  EXPECT_NE(e.find("exists only in FSDP1"), std::string::npos) << e;
  EXPECT_NE(e.find("\"version\": 1"), std::string::npos) << e;
  e = error_of({"--fsdp", "full_shard shard_grad_op"});
  EXPECT_NE(e.find("names two sharding strategies"), std::string::npos) << e;
  e = error_of({"--fsdp", "shard_grad_op offload"});
  EXPECT_NE(e.find("CPU offload with SHARD_GRAD_OP is not supported"), std::string::npos) << e;
  e = error_of({"--fsdp", "offload", "--fsdp_config", R"({"cpu_offload": false})"});
  EXPECT_NE(e.find("disagree"), std::string::npos) << e;
  e = error_of({"--fsdp", "full_shard", "--fsdp_config", "/no/such/fsdp.json"});
  EXPECT_NE(e.find("--fsdp_config /no/such/fsdp.json: file not found"), std::string::npos) << e;
  e = error_of({"--fsdp_config", R"({"version": 2})"});
  EXPECT_NE(e.find("--fsdp_config is read only with --fsdp"), std::string::npos) << e;
  EXPECT_EQ(error_of({"--fsdp_config", "{}"}), "");  // TRL's default
}

TEST(FsdpConfig, ContradictionsNameBothSources) {
  std::string e = error_of({"--fsdp", "full_shard", "--accelerate_config", "zero2"});
  EXPECT_NE(e.find("--fsdp 'full_shard' (FULL_SHARD: sharding zero3"), std::string::npos) << e;
  EXPECT_NE(e.find("contradicts --accelerate_config zero2 (sharding zero2"), std::string::npos) << e;
  e = error_of({"--fsdp", "full_shard", "--deepspeed", R"({"zero_optimization": {"stage": 3}})"});
  EXPECT_NE(e.find("--fsdp 'full_shard' and --deepspeed both choose"), std::string::npos) << e;
  e = error_of({"--fsdp", "full_shard", "--sharding", "zero1"});
  EXPECT_NE(e.find("contradicts --sharding zero1"), std::string::npos) << e;
  EXPECT_EQ(parsed({"--fsdp", "full_shard", "--sharding", "zero3"}).sharding, "zero3");  // agreeing is fine
  e = error_of({"--fsdp", "full_shard", "--dp_replicate_size", "2"}, 4);
  EXPECT_NE(e.find("but --dp_replicate_size 2 replicates: use hybrid_shard"), std::string::npos) << e;
  e = error_of({"--fsdp", "shard_grad_op", "--dp_shard_size", "1", "--dp_replicate_size", "2"});
  EXPECT_NE(e.find("--fsdp 'shard_grad_op'"), std::string::npos) << e;
  e = error_of({"--fsdp", "hybrid_shard", "--fsdp_config", R"({"version": 1})", "--dp_shard_size", "1",
                "--dp_replicate_size", "2"});
  EXPECT_NE(e.find("but --dp_shard_size 1 (cp 1) leaves one"), std::string::npos) << e;
  EXPECT_EQ(parsed({"--fsdp", "full_shard", "--dp_shard_size", "1"}, 1).sharding, "zero3");  // one rank: nothing to split
}

}  // namespace
}  // namespace trlhpc
