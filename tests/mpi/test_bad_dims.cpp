// Bad parallel sizes: ParallelDims validation throws UserError whose message names every number, and
// the message is identical on every rank. `trlhpc env` with bad sizes throws the same way before any
// communication (the last test calls it on rank 0 alone: a regression would hang there).
#include <gtest/gtest.h>
#include <mpi.h>

#include <sstream>

#include "same_message.hpp"
#include "trlhpc/cli/env_command.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

namespace trlhpc {
namespace {

using testing::expect_identical_on_every_rank;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

template <class F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}


void expect_names(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(BadDims, ProductNotTheWorldSizeNamesEveryNumber) {
  const int w = world_size();
  const std::string m = user_error_of([&] { ParallelDims{1, 1, 1, 1, w + 1}.resolved(w); });
  expect_names(m, {"tp_size " + std::to_string(w + 1), "= " + std::to_string(w + 1), "world size " + std::to_string(w),
                   "dp_replicate_size 1", "dp_shard_size 1", "cp_size 1", "sp_size 1"});
  expect_identical_on_every_rank(m);
}

TEST(BadDims, DpShardCannotBeInferred) {
  const int w = world_size();
  const std::string m = user_error_of([&] { ParallelDims{1, -1, 1, 1, w + 1}.resolved(w); });
  expect_names(m, {"--dp_shard_size", "world size " + std::to_string(w), "tp_size " + std::to_string(w + 1)});
  expect_identical_on_every_rank(m);
}

TEST(BadDims, ZeroAndNegativeSizes) {
  const int w = world_size();
  std::string m = user_error_of([&] { ParallelDims{1, -1, 1, 1, 0}.resolved(w); });
  expect_names(m, {"--tp_size", "(got 0)"});
  expect_identical_on_every_rank(m);
  m = user_error_of([&] { ParallelDims{1, -2, 1, 1, 1}.resolved(w); });
  expect_names(m, {"--dp_shard_size", "(got -2)"});
  expect_identical_on_every_rank(m);
  m = user_error_of([&] { ParallelDims{-3, -1, 1, 1, 1}.resolved(w); });
  expect_names(m, {"--dp_replicate_size", "(got -3)"});
  m = user_error_of([&] { ParallelDims{1, -1, 0, 1, 1}.resolved(w); });
  expect_names(m, {"--cp_size", "(got 0)"});
  m = user_error_of([&] { ParallelDims{1, -1, 1, -1, 1}.resolved(w); });
  expect_names(m, {"--sp_size", "(got -1)"});
}

// cp and sp together (Ulysses inside ring attention) only need ranks for their product.
TEST(BadDims, ContextAndUlyssesTogetherNeedTheirProduct) {
  const int w = world_size();
  if (w % 4 == 0) {
    const ParallelDims dims = ParallelDims{1, -1, 2, 2, 1}.resolved(w);
    EXPECT_EQ(dims.dp_shard, w / 4);
    EXPECT_EQ(dims.sequence_multiple(), 8);  // 2 x cp 2 x sp 2
    return;
  }
  const std::string m = user_error_of([&] { ParallelDims{1, -1, 2, 2, 1}.resolved(w); });
  expect_names(m, {"cp_size 2", "sp_size 2", "world size " + std::to_string(w)});
  expect_identical_on_every_rank(m);
}

TEST(BadDims, HeadsMustSplitOverTpAndSp) {
  const ParallelDims tp2{1, 1, 1, 1, 2}, sp4{1, 1, 1, 4, 1}, sp8{1, 1, 1, 8, 1};
  expect_names(user_error_of([&] { tp2.validate_model(3, 3); }), {"num_attention_heads 3", "tp_size 2"});
  // kv heads split over tp (tp | KVH) or replicated on tp/KVH ranks (KVH | tp); neither is an error.
  expect_names(user_error_of([&] { ParallelDims{1, 1, 1, 1, 4}.validate_model(12, 3); }),
               {"num_key_value_heads 3", "tp_size 4"});
  EXPECT_NO_THROW(tp2.validate_model(4, 1));
  EXPECT_NO_THROW((ParallelDims{1, 1, 1, 1, 4}.validate_model(4, 2)));
  expect_names(user_error_of([&] { sp4.validate_model(6, 6); }), {"num_attention_heads 6", "= 6", "sp_size 4"});
  expect_names(user_error_of([&] { sp8.validate_model(8, 6); }), {"num_attention_heads 8 and num_key_value_heads 6"});
  expect_names(user_error_of([&] { ParallelDims{1, 1, 1, 4, 1}.validate_model(12, 3); }),
               {"num_key_value_heads 3", "sp_size 4"});
  EXPECT_NO_THROW(tp2.validate_model(4, 2));
  EXPECT_NO_THROW(sp4.validate_model(8, 2));  // 2 kv heads each repeated twice across sp 4
  EXPECT_NO_THROW(sp4.validate_model(8, 8));
}

TEST(BadDims, SequenceMustSplitInto2CpOrSpChunks) {
  const ParallelDims cp2{1, 1, 2, 1, 1}, sp4{1, 1, 1, 4, 1};
  std::string m = user_error_of([&] { cp2.validate_sequence(1002, 0); });
  expect_names(m, {"--max_length 1002", "multiple of 4", "cp_size 2", "--max_length 1004"});
  expect_identical_on_every_rank(m);
  m = user_error_of([&] { sp4.validate_sequence(1024, 6); });
  expect_names(m, {"--pad_to_multiple_of 6", "multiple of 4", "sp_size 4", "--pad_to_multiple_of 8"});
  expect_names(user_error_of([&] { sp4.validate_sequence(0, 0); }), {"--max_length", "(got 0)"});
  EXPECT_NO_THROW(cp2.validate_sequence(1024, 64));
  EXPECT_NO_THROW((ParallelDims{1, 1, 1, 1, 1}.validate_sequence(1001, 0)));
}

TEST(BadDims, EnvCommandRejectsBadSizesOnEveryRank) {
  MpiEnvironment mpi(nullptr, nullptr);  // MPI is already up: this only reads rank, size and host
  const std::string tp = std::to_string(world_size() + 1);
  std::vector<std::string> args = {"env", "--tp_size", tp, "--dp_shard_size", "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out;
  const std::string m = user_error_of([&] { run_env_command(static_cast<int>(argv.size()), argv.data(), mpi, out); });
  expect_names(m, {"tp_size " + tp, "world size " + std::to_string(world_size())});
  expect_identical_on_every_rank(m);
  EXPECT_TRUE(out.str().empty());
}

TEST(BadDims, EnvCommandValidatesBeforeAnyCommunication) {
  MpiEnvironment mpi(nullptr, nullptr);
  if (mpi.world_rank() == 0) {  // the other ranks never call: a collective here would hang
    std::vector<std::string> args = {"env", "--cp_size", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    std::ostringstream out;
    expect_names(user_error_of([&] { run_env_command(static_cast<int>(argv.size()), argv.data(), mpi, out); }),
                 {"--cp_size", "(got 0)"});
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace trlhpc
