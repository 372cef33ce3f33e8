// parallelize(): the one set-up of a laid-out model. The layout-equivalence tests (data parallel,
// tensor parallel, sequence parallel) check that what it builds trains like the single process; this
// test checks the wiring itself on every layout of the world size: the tp slice, the padding of the
// store, the kv-share group, which sequence attention and shard each rank gets, and the error when the
// mesh was built without the model's kv heads.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "mesh_layouts.hpp"
#include "same_message.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/sequence/ring_attention.hpp"
#include "trlhpc/parallel/sequence/ulysses_attention.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

// 8 heads over 2 kv heads: tp 4 and 8 replicate kv heads (kv_share 2 and 4).
ModelConfig small_llama() {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 64;
  c.max_position_embeddings = 64;
  return c;
}

bool valid_for(const ModelConfig& config, const ParallelDims& dims) {
  try {
    validate_tensor_parallel(config, dims.tp);
    dims.validate_model(static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
    return true;
  } catch (const UserError&) {
    return false;
  }
}

TEST(Parallelize, WiresEveryLayoutFromTheMesh) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const ModelConfig config = small_llama();
  int checked = 0;
  for (const ParallelDims& layout : testing::all_layouts(world)) {
    if (!valid_for(config, layout)) continue;
    const ParallelDims dims = layout.for_model(8, 2);
    SCOPED_TRACE(dims.to_string());
    ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
    auto ops = make_cpu_ops();
    const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, ParallelizeOptions{});
    // 1. tp slice, 2. store padded for the fsdp group.
    EXPECT_EQ(model->tp_layout().size, dims.tp);
    EXPECT_EQ(model->tp_layout().rank, groups.tp().rank());
    EXPECT_EQ(model->decoder().tp_layout().rank, groups.tp().rank());
    for (const ParameterUnit& unit : model->store().units()) EXPECT_EQ(unit.padded_numel % dims.fsdp(), 0);
    // 4. kv-share group: tp / KVH ranks when tp exceeds the kv heads, consecutive tp ranks.
    const int share = dims.tp > 2 ? dims.tp / 2 : 1;
    EXPECT_EQ(groups.kv_share().size(), share);
    EXPECT_EQ(groups.kv_share().rank(), groups.tp().rank() % share);
    // 5. sequence attention by cp and sp.
    SequenceAttention& attention = model->sequence_attention();
    if (dims.sp > 1) EXPECT_NE(dynamic_cast<UlyssesAttention*>(&attention), nullptr);
    else if (dims.cp > 1) EXPECT_NE(dynamic_cast<RingAttention*>(&attention), nullptr);
    else EXPECT_NE(dynamic_cast<LocalAttention*>(&attention), nullptr);
    // 6. token sharding: the shard of the mesh coordinates, rows padded to the sequence multiple.
    const SequenceShard want = sequence_shard_for(dims, groups.cp().rank(), groups.sp().rank());
    EXPECT_EQ(model->sequence_shard().kind, want.kind);
    EXPECT_EQ(model->sequence_shard().rank, want.rank);
    EXPECT_EQ(model->sequence_shard().inner_rank, want.inner_rank);
    const Batch row = testing::synthetic_row(13, config.vocab_size, 3, 0, 0);  // 13: never a multiple
    const Batch got = model->shard_tokens(row);
    const Batch expected = shard_sequence(pad_sequence(row, dims.sequence_multiple()), want);
    EXPECT_EQ(got.input_ids, expected.input_ids);
    EXPECT_EQ(got.positions, expected.positions);
    // Zigzag over cp keeps 2 of 2cp chunks, sp one of its sp parts: T / (cp sp) tokens a row.
    EXPECT_EQ(got.seq_len, pad_sequence(row, dims.sequence_multiple()).seq_len / (dims.cp * dims.sp));
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// A mesh built from dims without for_model has kv_share groups of one: with tp above the kv heads the
// k/v gradients would never be summed, so parallelize refuses, with the same message on every rank.
TEST(Parallelize, RefusesAMeshBuiltWithoutTheModelsKvHeads) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 4) GTEST_SKIP() << "needs tp 4 > 2 kv heads";
  ProcessGroups groups(Mesh(ParallelDims{1, -1, 1, 1, 4}.resolved(world)), MPI_COMM_WORLD);
  auto ops = make_cpu_ops();
  std::string message;
  try {
    parallelize(small_llama(), *ops, groups, ParallelizeOptions{});
  } catch (const RuntimeFailure& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("for_model"), std::string::npos) << message;
  EXPECT_NE(message.find("kv_share groups of 2 ranks"), std::string::npos) << message;
  testing::expect_identical_on_every_rank(message.substr(message.find("parallelize")));
}

}  // namespace
}  // namespace trlhpc
