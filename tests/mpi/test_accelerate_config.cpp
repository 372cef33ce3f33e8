// `--accelerate_config NAME|FILE` (cli/accelerate_config.hpp): every named profile parses and maps to
// the documented sharding and sizes; explicit flags win over the file; a hand-written accelerate file
// with parallelism_config drives a real hybrid-sharded training step; bad input (num_processes !=
// world size, FSDP with dp_replicate > 1 and dp_shard == 1, zero stage 4, sizes whose product is not
// the world size, contradictions) is a UserError naming the numbers, identical on every rank.
#include <mpi.h>

#include <fstream>

#include "same_message.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/cli/sft_options.hpp"

namespace trlhpc {
namespace {

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The UserError message of `fn` (empty when it does not throw), checked to be the same on every rank.
template <class Fn>
std::string user_error_of(Fn&& fn) {
  std::string message;
  try {
    fn();
  } catch (const UserError& e) {
    message = e.what();
  }
  testing::expect_identical_on_every_rank(message);
  return message;
}

std::string with_processes(const std::string& body, int n) { return body + "num_processes: " + std::to_string(n) + "\n"; }

TEST(AccelerateConfig, EveryProfileParsesToItsMapping) {
  const int world = world_size();
  struct Expect {
    const char* name;
    const char* sharding;
    int64_t cp, sp;
    bool checkpointing;
  };
  const Expect expected[] = {{"multi_gpu", "none", 1, 1, false}, {"zero1", "zero1", 1, 1, false},
                             {"zero2", "zero2", 1, 1, false},    {"zero3", "zero3", 1, 1, false},
                             {"fsdp1", "zero3", 1, 1, false},    {"fsdp2", "zero3", 1, 1, false},
                             {"context_parallel_2gpu", "zero3", 2, 1, true},
                             {"alst_ulysses_4gpu", "zero3", 1, 2, false}};
  ASSERT_EQ(accelerate_profile_names().size(), std::size(expected));
  for (const Expect& e : expected) {
    // Profiles leave the process count to the launcher: they parse on any world size.
    const AccelerateConfig c = read_accelerate_config(e.name, world);
    EXPECT_TRUE(c.named_profile) << e.name;
    EXPECT_EQ(c.sharding, e.sharding) << e.name;
    EXPECT_EQ(c.cp.value_or(1), e.cp) << e.name;
    EXPECT_EQ(c.sp.value_or(1), e.sp) << e.name;
    EXPECT_EQ(c.dp_shard.value_or(-1), -1) << e.name << ": a profile's dp_shard is the rest of the world";
    EXPECT_EQ(c.activation_checkpointing.value_or(false), e.checkpointing) << e.name;
    EXPECT_EQ(c.mixed_precision, "bf16") << e.name;
    EXPECT_TRUE(c.warnings.empty()) << e.name << ": " << (c.warnings.empty() ? "" : c.warnings.front());
  }
}

TEST(AccelerateConfig, ExplicitFlagsWinOverTheProfile) {
  const SftOptionContext context{world_size(), false};
  SftConfig a;
  parse_sft_options({"--accelerate_config", "zero2"}, a, nullptr, context);
  EXPECT_EQ(a.sharding, "zero2");
  SftConfig b;
  parse_sft_options({"--accelerate_config", "zero2", "--sharding", "zero1"}, b, nullptr, context);
  EXPECT_EQ(b.sharding, "zero1");
  SftConfig c;
  parse_sft_options({"--accelerate_config", "context_parallel_2gpu"}, c, nullptr, context);
  EXPECT_EQ(c.cp_size, 2);
  EXPECT_TRUE(c.gradient_checkpointing);
  SftConfig d;
  parse_sft_options({"--accelerate_config", "context_parallel_2gpu", "--cp_size", "1", "--gradient_checkpointing",
                     "false"}, d, nullptr, context);
  EXPECT_EQ(d.cp_size, 1);
  EXPECT_FALSE(d.gradient_checkpointing);
  // mixed_precision: bf16 (every profile's) turns --bf16 on, as accelerate launch + TrainingArguments do;
  // an explicit --bf16 false keeps fp32.
  EXPECT_TRUE(a.bf16);
  EXPECT_EQ(a.seq_parallel_communication_data_type, "fp32");
  SftConfig ulysses;  // the ALST profile's deepspeed_config.seq_parallel_communication_data_type: bf16
  parse_sft_options({"--accelerate_config", "alst_ulysses_4gpu"}, ulysses, nullptr, context);
  EXPECT_EQ(ulysses.seq_parallel_communication_data_type, "bf16");
  SftConfig e;
  parse_sft_options({"--accelerate_config", "zero2", "--bf16", "false"}, e, nullptr, context);
  EXPECT_FALSE(e.bf16);
}

TEST(AccelerateConfig, MixedPrecisionNoKeepsFp32AndFp16IsRefused) {
  const int world = world_size();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One folder for all ranks (rank 0 makes it): the message names the file, and every rank must give
  // the same message.
  std::string dir = rank == 0 ? testing::make_temp_dir("accelerate_precision") : std::string();
  int length = static_cast<int>(dir.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<size_t>(length));
  MPI_Bcast(dir.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  const SftOptionContext context{world, false};
  for (const char* precision : {"no", "fp16"}) {
    const std::string path = dir + "/" + precision + ".yaml";
    if (rank == 0) std::ofstream(path) << "distributed_type: MULTI_GPU\nmixed_precision: " << precision << "\n";
    MPI_Barrier(MPI_COMM_WORLD);
    SftConfig c;
    const std::string error = user_error_of([&] { parse_sft_options({"--accelerate_config", path}, c, nullptr, context); });
    if (std::string(precision) == "no") {
      EXPECT_EQ(error, "");
      EXPECT_FALSE(c.bf16);
    } else {
      EXPECT_NE(error.find(path), std::string::npos) << error;
      EXPECT_NE(error.find("mixed_precision: fp16"), std::string::npos) << error;
      SftConfig flag_wins;  // --bf16 decides, the file's fp16 is then not used
      EXPECT_EQ(user_error_of([&] {
                  parse_sft_options({"--accelerate_config", path, "--bf16"}, flag_wins, nullptr, context);
                }),
                "");
      EXPECT_TRUE(flag_wins.bf16);
    }
  }
}

TEST(AccelerateConfig, HandWrittenFileWithParallelismConfigTrains) {
  const int world = world_size();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int replicate = world % 2 == 0 && world >= 4 ? 2 : 1;
  const std::string path = testing::make_temp_dir("accelerate_rank" + std::to_string(rank)) + "/hsdp.yaml";
  std::ofstream(path) << "compute_environment: LOCAL_MACHINE\n"
                         "distributed_type: FSDP\n"
                         "mixed_precision: 'no'\n"
                         "fsdp_config:\n"
                         "  fsdp_version: 1\n"
                         "  fsdp_sharding_strategy: HYBRID_SHARD\n"
                         "  fsdp_state_dict_type: FULL_STATE_DICT\n"
                         "  fsdp_made_up_setting: 3\n"
                         "parallelism_config:\n"
                         "  parallelism_config_dp_replicate_size: " << replicate << "\n"
                         "  parallelism_config_dp_shard_size: " << world / replicate << "\n"
                         "num_processes: " << world << "\n";
  const AccelerateConfig accelerate = read_accelerate_config(path, world);
  ASSERT_EQ(accelerate.warnings.size(), 1u);
  EXPECT_NE(accelerate.warnings[0].find(path + ": line 8: unknown key 'fsdp_config.fsdp_made_up_setting'"),
            std::string::npos)
      << accelerate.warnings[0];

  SftConfig config;
  parse_sft_options({"--accelerate_config", path}, config, nullptr, SftOptionContext{world, false});
  EXPECT_EQ(config.sharding, "zero3");
  EXPECT_EQ(config.dp_replicate_size, replicate);
  EXPECT_EQ(config.dp_shard_size, world / replicate);

  // The mapped options drive a real step: hybrid ZeRO-3 matches the single-process reference.
  const ParallelDims dims = ParallelDims{static_cast<int>(config.dp_replicate_size), static_cast<int>(config.dp_shard_size),
                                         static_cast<int>(config.cp_size), static_cast<int>(config.sp_size),
                                         static_cast<int>(config.tp_size)}.resolved(world);
  ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
  HfModelDir dir(testing::tests_dir() + "/golden/qwen2_tiny/model");
  testing::CurveOptions options;
  options.steps = 2;
  testing::Layout layout;
  layout.sharding = parse_sharding(config.sharding);
  layout.dp_replicate = dims.dp_replicate;
  layout.ranks = world;
  const testing::Curve got = testing::train_curve(dir.config(), weights_from_hf_dir(dir), groups, layout, options);
  const testing::Curve want = testing::reference_curve(dir.config(), weights_from_hf_dir(dir), options);
  for (size_t s = 0; s < want.steps.size(); ++s)
    EXPECT_LE(testing::relative_difference(got.steps[s].loss, want.steps[s].loss), 1e-5) << "step " << s;
}

TEST(AccelerateConfig, BadInputNamesTheNumbers) {
  const int world = world_size();
  auto parse = [&](const std::string& text) { return parse_accelerate_config(text, "user.yaml", false, world); };
  auto contains = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };

  const std::string wrong_count = user_error_of([&] { parse(with_processes("distributed_type: MULTI_GPU\n", world + 3)); });
  EXPECT_TRUE(contains(wrong_count, "num_processes " + std::to_string(world + 3))) << wrong_count;
  EXPECT_TRUE(contains(wrong_count, std::to_string(world) + " ranks")) << wrong_count;

  const std::string hybrid = user_error_of([&] {
    parse("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
          "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 1\n");
  });
  EXPECT_TRUE(contains(hybrid, "parallelism_config_dp_replicate_size 2")) << hybrid;
  EXPECT_TRUE(contains(hybrid, "parallelism_config_dp_shard_size 1")) << hybrid;

  const std::string stage = user_error_of([&] { parse("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n"); });
  EXPECT_TRUE(contains(stage, "zero_stage 4")) << stage;

  const std::string product = user_error_of([&] {
    parse("distributed_type: MULTI_GPU\nparallelism_config:\n  parallelism_config_dp_replicate_size: 1\n"
          "  parallelism_config_dp_shard_size: " + std::to_string(world + 1) + "\n  parallelism_config_cp_size: 2\n");
  });
  EXPECT_TRUE(contains(product, "= " + std::to_string(2 * (world + 1)))) << product;
  EXPECT_TRUE(contains(product, std::to_string(world) + " ranks")) << product;

  // Contradictions and gaps.
  EXPECT_TRUE(contains(user_error_of([&] { parse("distributed_type: DEEPSPEED\n"); }), "zero_stage"));
  EXPECT_TRUE(contains(user_error_of([&] { parse("distributed_type: MULTI_GPU\ndeepspeed_config:\n  zero_stage: 2\n"); }),
                       "contradicts distributed_type MULTI_GPU"));
  EXPECT_TRUE(contains(user_error_of([&] {
                         parse("distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n"
                               "  fsdp_sharding_strategy: SHARD_GRAD_OP\n");
                       }),
                       "disagree"));
  EXPECT_TRUE(contains(user_error_of([&] { parse("distributed_type: TPU\n"); }), "TPU"));
  EXPECT_TRUE(contains(user_error_of([&] { read_accelerate_config("zero5", world); }), "zero5"));
  // Named profiles are exempt from the process count (TRL's files say 8, 2 or 4).
  EXPECT_EQ(user_error_of([&] { read_accelerate_config("zero3", world); }), "");
  // Fine: SHARD_GRAD_OP -> zero2; FSDP without fsdp_config -> FULL_SHARD; zero stage 0 -> DDP.
  EXPECT_EQ(parse("distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n").sharding, "zero2");
  EXPECT_EQ(parse("distributed_type: FSDP\n").sharding, "zero3");
  EXPECT_EQ(parse("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 0\n").sharding, "none");
}

// CPU offload keys (host_offload.hpp): read with DeepSpeed's and FSDP's meanings, no longer ignored;
// what trlhpc cannot do is refused naming the key and the file, the same on every rank (the parse
// needs no other rank, so it runs before any collective).
TEST(AccelerateConfig, OffloadKeysMapOrAreRefusedNamingTheKey) {
  const int world = world_size();
  auto parse = [&](const std::string& text) { return parse_accelerate_config(text, "user.yaml", false, world); };
  auto deepspeed = [](int stage, const std::string& optimizer, const std::string& param) {
    return "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: " + std::to_string(stage) +
           "\n  offload_optimizer_device: " + optimizer + "\n  offload_param_device: " + param + "\n";
  };
  auto fsdp = [](const std::string& strategy, bool offload) {
    return "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: " + strategy +
           "\n  fsdp_offload_params: " + (offload ? "true" : "false") + "\n";
  };
  for (int stage : {1, 2, 3}) {
    const AccelerateConfig c = parse(deepspeed(stage, "cpu", "none"));
    EXPECT_EQ(c.offload, "optimizer") << stage;
    EXPECT_EQ(c.offload_key, "deepspeed_config.offload_optimizer_device cpu");
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  }
  EXPECT_EQ(parse(deepspeed(3, "cpu", "cpu")).offload, "parameters");
  EXPECT_EQ(parse(deepspeed(3, "none", "none")).offload, "none");
  EXPECT_EQ(parse(fsdp("FULL_SHARD", true)).offload, "parameters");
  EXPECT_EQ(parse(fsdp("FULL_SHARD", true)).offload_key, "fsdp_config.fsdp_offload_params true");
  EXPECT_EQ(parse(fsdp("FULL_SHARD", false)).offload, "none");
  for (const std::string& name : accelerate_profile_names()) EXPECT_EQ(read_accelerate_config(name, world).offload, "none");
  // Active only under its distributed_type (accelerate reads only the active section).
  EXPECT_EQ(parse("distributed_type: MULTI_GPU\nfsdp_config:\n  fsdp_offload_params: true\n").offload, "none");

  const struct {
    std::string text;
    std::vector<std::string> says;
  } refused[] = {
      {deepspeed(2, "nvme", "none"), {"user.yaml", "deepspeed_config.offload_optimizer_device nvme", "use cpu"}},
      {deepspeed(3, "cpu", "nvme"), {"user.yaml", "deepspeed_config.offload_param_device nvme"}},
      {deepspeed(0, "cpu", "none"), {"user.yaml", "offload_optimizer_device cpu needs zero_stage 1, 2 or 3"}},
      {deepspeed(2, "cpu", "cpu"), {"user.yaml", "offload_param_device cpu needs zero_stage 3", "zero_stage is 2"}},
      {deepspeed(3, "none", "cpu"), {"user.yaml", "offload_param_device cpu without offload_optimizer_device cpu"}},
      {fsdp("SHARD_GRAD_OP", true), {"user.yaml", "fsdp_config.fsdp_offload_params true with SHARD_GRAD_OP"}},
      {fsdp("NO_SHARD", true), {"user.yaml", "fsdp_offload_params true with NO_SHARD"}},
      {fsdp("HYBRID_SHARD_ZERO2", true), {"user.yaml", "fsdp_offload_params true with HYBRID_SHARD_ZERO2"}},
  };
  for (const auto& bad : refused) {
    const std::string message = user_error_of([&] { parse(bad.text); });
    for (const std::string& part : bad.says) EXPECT_NE(message.find(part), std::string::npos) << bad.text << message;
  }

  // --sharding overriding the file cannot drop the offload's precondition silently (sft_plan refuses it).
  SftConfig config;
  apply_accelerate_config(parse(deepspeed(3, "cpu", "cpu")), {"sharding"}, config);
  EXPECT_EQ(config.offload, "parameters");
  EXPECT_EQ(config.offload_source, "deepspeed_config.offload_param_device cpu in ");  // parse() sets no path
}

}  // namespace
}  // namespace trlhpc
