// `trlhpc env` body: the JSON report (printed by rank 0) holds versions, every rank, and each rank's
// groups as the mesh predicts them; the human table prints; --help and bad flags behave.
#include <gtest/gtest.h>
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "trlhpc/cli/env_command.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/mesh.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

namespace trlhpc {
namespace {

std::string run_env(MpiEnvironment& mpi, std::vector<std::string> args) {
  args.insert(args.begin(), "env");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out;
  EXPECT_EQ(run_env_command(static_cast<int>(argv.size()), argv.data(), mpi, out), 0);
  return out.str();
}

TEST(EnvCommand, JsonReportHasEveryRankAndItsGroups) {
  MpiEnvironment mpi(nullptr, nullptr);  // MPI is already up: this only reads rank, size and host
  const int w = mpi.world_size();
  const int tp = w % 2 == 0 ? 2 : 1;
  const std::string text = run_env(mpi, {"--json", "--tp_size", std::to_string(tp), "--device", "cpu"});
  if (mpi.world_rank() != 0) {
    EXPECT_TRUE(text.empty());
    return;
  }
  const auto report = nlohmann::json::parse(text);
  for (const char* lib : {"trlhpc", "MPI library", "MPI standard", "HDF5", "OpenBLAS", "CUDA"})
    EXPECT_TRUE(report["versions"].contains(lib)) << lib;
  EXPECT_EQ(report["world_size"], w);
  EXPECT_EQ(report["mesh"]["tp"], tp);
  EXPECT_EQ(report["mesh"]["dp_shard"], w / tp);
  EXPECT_EQ(report["mesh"]["tp_sequence_parallel"], false);
  EXPECT_TRUE(report["versions"].contains("OpenBLAS core"));
  ASSERT_EQ(report["ranks"].size(), static_cast<size_t>(w));
  int ranks_on_nodes = 0;
  for (const auto& node : report["nodes"]) ranks_on_nodes += static_cast<int>(node["ranks"].size());
  EXPECT_EQ(ranks_on_nodes, w);
  const Mesh mesh(ParallelDims{1, w / tp, 1, 1, tp});
  for (int r = 0; r < w; ++r) {
    const auto& rank = report["ranks"][static_cast<size_t>(r)];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_EQ(rank["device"], "cpu");
    EXPECT_GE(rank["cpu_threads"].get<int>(), 1);
    for (GroupKind kind : kAllGroupKinds) {
      const auto& g = rank["groups"][group_kind_name(kind)];
      EXPECT_EQ(g["members"].get<std::vector<int>>(), mesh.group_members(kind, r)) << group_kind_name(kind);
      EXPECT_EQ(g["rank"], mesh.group_rank(kind, r));
      EXPECT_EQ(g["size"], mesh.group_size(kind));
    }
  }
}

TEST(EnvCommand, HumanTableAndHelp) {
  MpiEnvironment mpi(nullptr, nullptr);
  const std::string text = run_env(mpi, {"--dp_shard_size", "-1"});
  const std::string help = run_env(mpi, {"--help"});
  if (mpi.world_rank() != 0) return;
  for (const char* part : {"Versions", "MPI library", "World: ", "Mesh (outer -> inner", "Groups", "fsdp", "loss"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  EXPECT_NE(help.find("--tp_size"), std::string::npos) << help;
  EXPECT_NE(help.find("--tp_sequence_parallel"), std::string::npos) << help;
}

TEST(EnvCommand, MeshLineNamesTpSequenceParallel) {
  MpiEnvironment mpi(nullptr, nullptr);
  const int tp = mpi.world_size() % 2 == 0 ? 2 : 1;
  const std::string text = run_env(mpi, {"--tp_size", std::to_string(tp), "--tp_sequence_parallel"});
  if (mpi.world_rank() != 0) return;
  // At tp 1 there is nothing to split: the mesh line stays plain.
  EXPECT_EQ(text.find("(sequence parallel)") != std::string::npos, tp > 1) << text;
}

// --model names the architecture with the memory plan (qwen3_tiny: a Qwen3 directory saved by transformers).
TEST(EnvCommand, ModelPlanNamesTheArchitecture) {
  MpiEnvironment mpi(nullptr, nullptr);
  const std::string model = std::string(TRLHPC_TESTS_DIR) + "/golden/qwen3_tiny/model";
  const std::string json_text = run_env(mpi, {"--json", "--model", model});
  const std::string text = run_env(mpi, {"--model", model});
  if (mpi.world_rank() != 0) return;
  const auto plan = nlohmann::json::parse(json_text)["memory_per_rank"];
  EXPECT_EQ(plan["architecture"], "Qwen3ForCausalLM");
  EXPECT_GT(plan["activation_bytes"].get<int64_t>(), 0);
  EXPECT_NE(text.find("Memory per rank (Qwen3ForCausalLM, "), std::string::npos) << text;
}

TEST(EnvCommand, UnknownFlagIsAUserError) {
  MpiEnvironment mpi(nullptr, nullptr);
  std::vector<std::string> args = {"env", "--tensor_parallel", "2"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out;
  try {
    run_env_command(static_cast<int>(argv.size()), argv.data(), mpi, out);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trlhpc
