// Bad cp/sp input through the `trlhpc sft` path (option parsing + run_sft_job): query heads not
// divisible by sp_size, max_length / pad_to_multiple_of not divisible by 2*cp_size (2*cp*sp with both),
// a vocabulary that tp does not divide, and max_length not divisible by tp under --tp_sequence_parallel
// are UserErrors that name the numbers, identical on every rank, raised
// before any collective: each case is run a second time on world rank 0 alone, which would hang in a
// collective (the other ranks wait at a barrier) if the check came after one.
// Cases that need cp or sp = world size > 1 run for np >= 2; cp and sp together need np a multiple of 4.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>

#include "same_message.hpp"
#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/sft_job.hpp"

namespace trlhpc {
namespace {

using testing::expect_identical_on_every_rank;

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string data_dir() { return testing::shared_data_dir(); }

// Runs `trlhpc sft ARGS` the way main does and returns the UserError message ("" if none).
std::string sft_error(const std::vector<std::string>& args) {
  MpiEnvironment mpi(nullptr, nullptr);  // MPI is already up: this only reads rank, size and host
  try {
    SftConfig config;
    std::string help;
    if (!parse_sft_options(args, config, &help, SftOptionContext{mpi.world_size(), mpi.world_rank() == 0})) return "";
    run_sft_job(config, mpi);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}


// The case on every rank (same message, naming `parts`), then on rank 0 alone (no collective before it).
void expect_user_error(const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  const std::string message = sft_error(args);
  EXPECT_FALSE(message.empty()) << "expected a UserError";
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  expect_identical_on_every_rank(message);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) EXPECT_EQ(sft_error(args), message);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The output directory is never created: every case fails validation first.
std::vector<std::string> base_args(const std::string& model_config, const std::string& tag) {
  return {"--model_config", model_config, "--dataset_name", data_dir() + "/datasets/c4_text.jsonl",
          "--output_dir", "/tmp/trlhpc-never-written-" + tag, "--max_steps", "1", "--device", "cpu"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// cp x sp hybrid: max_length must split into 2 x cp x sp chunks.
TEST(SequenceParallelBadInput, CpAndSpTogetherNeedTheirChunkMultiple) {
  if (world_size() % 4 != 0) GTEST_SKIP() << "needs cp 2 x sp 2 ranks";
  const auto args = base_args(data_dir() + "/stories260K/config.json", "sp_bad_both") +
                    std::vector<std::string>{"--cp_size", "2", "--sp_size", "2", "--max_length", "36"};
  expect_user_error(args, {"--max_length 36", "multiple of 8", "cp_size 2", "sp_size 2"});
}

TEST(SequenceParallelBadInput, MaxLengthNotDivisibleBy2Cp) {
  const int w = world_size();
  if (w < 2) GTEST_SKIP() << "needs cp_size = world size > 1";
  const std::string cp = std::to_string(w), max_length = std::to_string(16 * w + 2);
  const auto args = base_args(data_dir() + "/stories260K/config.json", "sp_bad_len") +
                    std::vector<std::string>{"--cp_size", cp, "--max_length", max_length};
  expect_user_error(args, {"--max_length " + max_length, "multiple of " + std::to_string(2 * w), "cp_size " + cp});
  const auto pad = base_args(data_dir() + "/stories260K/config.json", "sp_bad_pad") +
                   std::vector<std::string>{"--cp_size", cp, "--max_length", std::to_string(16 * w),
                                            "--pad_to_multiple_of", "3"};
  expect_user_error(pad, {"--pad_to_multiple_of 3", "multiple of " + std::to_string(2 * w), "cp_size " + cp});
}

TEST(SequenceParallelBadInput, HeadsNotDivisibleBySp) {
  const int w = world_size();
  if (w < 2) GTEST_SKIP() << "needs sp_size = world size > 1";
  // A llama with 3 query and 3 kv heads: 3 splits over no sp_size in {2, 4, 8}.
  const std::string dir = testing::make_temp_dir("sp_bad_heads");
  std::ofstream(dir + "/config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 48,
             "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 3,
             "num_key_value_heads": 3, "vocab_size": 512, "max_position_embeddings": 256})";
  const std::string sp = std::to_string(w);
  const auto args = base_args(dir + "/config.json", "sp_bad_heads_out") +
                    std::vector<std::string>{"--sp_size", sp, "--max_length", "64"};
  expect_user_error(args, {"num_attention_heads 3", "sp_size " + sp});
  std::filesystem::remove_all(dir);
}

// Tensor parallel splits the vocabulary by rows without padding: vocab_size % tp_size != 0 is a
// UserError naming both numbers, raised before any collective (the heads divide, so validate_model passes).
TEST(SequenceParallelBadInput, TensorParallelVocabularyMustDivide) {
  const int w = world_size();
  if (w < 2) GTEST_SKIP() << "needs tp_size = world size > 1";
  const std::string dir = testing::make_temp_dir("tp_bad_vocab");
  const std::string vocab = std::to_string(64 * w + 1);
  std::ofstream(dir + "/config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )" << 16 * w
      << R"(, "intermediate_size": )" << 32 * w << R"(, "num_hidden_layers": 1, "num_attention_heads": )" << 2 * w
      << R"(, "num_key_value_heads": )" << w << R"(, "vocab_size": )" << vocab << R"(, "max_position_embeddings": 256})";
  const auto args = base_args(dir + "/config.json", "tp_bad_vocab_out") +
                    std::vector<std::string>{"--tp_size", std::to_string(w)};
  expect_user_error(args, {"vocab_size " + vocab, "tp_size " + std::to_string(w)});
  std::filesystem::remove_all(dir);
}

// --tp_sequence_parallel splits every rank's tokens over tp: max_length must divide by tp_size.
TEST(SequenceParallelBadInput, TpSequenceParallelMaxLengthMustDivide) {
  const int w = world_size();
  if (w < 2) GTEST_SKIP() << "needs tp_size = world size > 1";
  const std::string dir = testing::make_temp_dir("tp_sp_bad_len");
  std::ofstream(dir + "/config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )" << 16 * w
      << R"(, "intermediate_size": )" << 32 * w << R"(, "num_hidden_layers": 1, "num_attention_heads": )" << 2 * w
      << R"(, "num_key_value_heads": )" << w << R"(, "vocab_size": )" << 64 * w << R"(, "max_position_embeddings": 256})";
  const std::string tp = std::to_string(w), max_length = std::to_string(16 * w + 1);
  const auto args = base_args(dir + "/config.json", "tp_sp_bad_len_out") +
                    std::vector<std::string>{"--tp_size", tp, "--tp_sequence_parallel", "--max_length", max_length};
  expect_user_error(args, {"--max_length " + max_length, "multiple of " + tp, "tp_size " + tp, "--tp_sequence_parallel"});
  if (w >= 4) {
    // With cp 2 as well: 2 x cp 2 x tp (w/2) zigzag chunks; a max_length that suits cp alone is refused.
    const std::string half = std::to_string(w / 2), multiple = std::to_string(4 * (w / 2)), len = std::to_string(4 * (w / 2) + 4);
    const auto with_cp = base_args(dir + "/config.json", "tp_sp_cp_bad_len_out") +
                         std::vector<std::string>{"--tp_size", half, "--cp_size", "2", "--tp_sequence_parallel",
                                                  "--max_length", len};
    expect_user_error(with_cp, {"--max_length " + len, "multiple of " + multiple, "cp_size 2", "tp_size " + half});
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trlhpc
