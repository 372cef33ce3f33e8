// Overlap of gradient communication with the backward (DDP, small buckets): the buckets of the units
// whose backward finished first (final norm + head, then the last layers) must be reduced before the
// backward ends, i.e. while the lower layers are still computing, not all at once in
// finish_gradients(). Recorded by the strategy's CommTimeline.
//
// The model is sized so each layer's backward takes tens of milliseconds on one thread, far longer than
// an all-reduce of a 16K-element bucket between two processes. On two oversubscribed, shared cores one
// step can still be unlucky (the peer descheduled for the whole backward), so the check passes when any
// of five steps shows it. It runs on 1 and 2 ranks (the issue's setting; on more ranks oversubscription
// makes a timing statement meaningless), and is skipped with a message otherwise.
#include <mpi.h>

#include <cstdio>

#include "test_data_parallel_support.hpp"

namespace trlhpc {
namespace {

ModelConfig overlap_config() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "initializer_range": 0.02})");
  return ModelConfig::from_json(j, "overlap_config");
}

TEST(DataParallelOverlap, FirstBucketsCompleteBeforeBackwardEnds) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world > 2) GTEST_SKIP() << "timing check runs on 1 or 2 ranks only (got " << world << ")";
  const ModelConfig config = overlap_config();
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
  testing::Layout layout;
  layout.bucket_elements = 16 * 1024;
  auto ops = make_cpu_ops();
  Trainer trainer(config, *ops, groups, testing::trainer_options(layout));
  trainer.model().load_weights(weights_from_init(config, 11));

  int overlapped_steps = 0;
  double best_lead_ms = 0, best_share = 0;
  for (int step = 0; step < 5; ++step) {
    std::vector<Batch> rows;
    for (int i = 0; i < 2; ++i)
      rows.push_back(testing::synthetic_row(128, config.vocab_size, 9, step, groups.dp().rank() * 2 + i));
    trainer.step({testing::concat_rows(rows)}, 1e-3);
    const CommTimeline& t = trainer.model().strategy().timeline();
    ASSERT_FALSE(t.bucket_done.empty());
    ASSERT_EQ(t.bucket_done.size(), t.bucket_launch.size());
    for (size_t b = 0; b < t.bucket_done.size(); ++b) {
      EXPECT_LE(t.bucket_launch[b], t.backward_end) << "bucket " << b << " launched after the backward";
      EXPECT_GE(t.bucket_done[b], t.bucket_launch[b]) << "bucket " << b;
    }
    size_t hidden = 0;
    for (double done : t.bucket_done) hidden += done < t.backward_end;
    // The first bucket (launched right after the head's backward) done before the end of the backward.
    int ok = t.bucket_done.front() < t.backward_end ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);  // every rank agrees
    overlapped_steps += ok;
    best_lead_ms = std::max(best_lead_ms, (t.backward_end - t.bucket_done.front()) * 1e3);
    best_share = std::max(best_share, static_cast<double>(hidden) / static_cast<double>(t.bucket_done.size()));
  }
  EXPECT_GE(overlapped_steps, 1) << "in no step did the first bucket finish before the backward ended";
  if (rank == 0)
    std::printf("[ measured ] %d ranks: first bucket done before backward end in %d of 5 steps, by up to %.1f ms; "
                "up to %.0f%% of buckets done before backward end\n",
                world, overlapped_steps, best_lead_ms, 100 * best_share);
}

}  // namespace
}  // namespace trlhpc
