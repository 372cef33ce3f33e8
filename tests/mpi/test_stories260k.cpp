// The real pretrained stories260K (Llama architecture, ../shared/data/stories260K):
//  - its loss on simple English is far below ln(vocab) (a random model sits at ~ln 512 = 6.24);
//  - 20 steps of fine-tuning on text lower the loss (DDP over the ranks of the job);
//  - the saved Hugging Face directory reloads to bit-identical logits.
#include <mpi.h>

#include <cmath>
#include <filesystem>

#include "test_support.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/model_export.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {
namespace {

const char* kStory[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "One day, she saw a big dog. The dog was very friendly and they played together all day.",
    "Tom had a red ball. He liked to kick the ball with his friends. They were very happy.",
    "The sun was shining and the birds were singing. Mom said it was a good day for a walk.",
};

// One row per sentence, right-padded: BOS is added by the tokenizer's post-processor.
Batch story_batch(const tokenizer::Tokenizer& tok, int first, int count) {
  std::vector<std::vector<int32_t>> rows;
  int64_t T = 0;
  for (int i = first; i < first + count; ++i) {
    rows.push_back(tok.encode(kStory[i % 4], true));
    T = std::max<int64_t>(T, static_cast<int64_t>(rows.back().size()));
  }
  Batch b;
  b.rows = count;
  b.seq_len = T;
  for (const auto& ids : rows) {
    for (int64_t t = 0; t < T; ++t) {
      const bool real = t < static_cast<int64_t>(ids.size());
      b.input_ids.push_back(real ? ids[static_cast<size_t>(t)] : 0);
      b.targets.push_back(t + 1 < static_cast<int64_t>(ids.size()) ? ids[static_cast<size_t>(t + 1)] : kIgnoreIndex);
      b.positions.push_back(static_cast<int32_t>(t));
      b.doc_ids.push_back(real ? 0 : kPaddingDocId);
    }
  }
  return b;
}

std::string stories_dir() { return testing::shared_data_dir() + "/stories260K"; }

TEST(Stories260K, PretrainedLossIsFarBelowUniform) {
  auto ops = make_cpu_ops();
  HfModelDir dir(stories_dir());
  ParameterStore store(dir.config(), *ops);
  load_all_units(weights_from_hf_dir(dir), *ops, store);
  Decoder decoder(dir.config(), *ops, store);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(stories_dir());
  const LossResult r = decoder.forward_loss(DeviceBatch::upload(story_batch(tok, 0, 4), *ops));
  const double loss = r.loss_sum / static_cast<double>(r.target_tokens);
  EXPECT_GT(r.target_tokens, 40);
  EXPECT_LT(loss, 0.4 * std::log(512.0)) << "a model that knows TinyStories predicts these tokens well";
}

TEST(Stories260K, FineTuningLowersTheLossAndTheSavedModelReloads) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
  auto ops = make_cpu_ops();
  HfModelDir dir(stories_dir());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(stories_dir());
  TrainerOptions options;
  Trainer trainer(dir.config(), *ops, groups, options);
  trainer.model().load_weights(weights_from_hf_dir(dir));

  // Global batch: the 4 sentences, dealt over the dp ranks (a rank without one trains on padding).
  const int dp = groups.dp().size(), r = groups.dp().rank();
  const std::vector<Batch> micro = {r < 4 ? story_batch(tok, r * ((4 + dp - 1) / dp), std::min(4 - r * ((4 + dp - 1) / dp), (4 + dp - 1) / dp))
                                          : padding_batch(8)};
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) losses.push_back(trainer.step(micro, 2e-3).loss);
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "loss " << losses.front() << " -> " << losses.back();

  // Save, reload, compare logits bit for bit.
  std::string out = rank == 0 ? testing::make_temp_dir("stories-save") : "";
  int length = static_cast<int>(out.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  out.resize(static_cast<size_t>(length));
  MPI_Bcast(out.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  export_hf_model(trainer.model(), out, stories_dir(), rank == 0);
  ASSERT_TRUE(std::filesystem::exists(out + "/tokenizer.json"));

  const DeviceBatch probe = DeviceBatch::upload(story_batch(tok, 0, 2), *ops);
  Tensor trained = trainer.model().decoder().logits(probe);
  HfModelDir reloaded(out);
  ParameterStore store(reloaded.config(), *ops);
  load_all_units(weights_from_hf_dir(reloaded), *ops, store);
  Decoder decoder(reloaded.config(), *ops, store);
  Tensor again = decoder.logits(probe);
  ASSERT_TRUE(testing::all_close(again.f32(), trained.f32(), static_cast<size_t>(trained.numel()), 0, 0));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace trlhpc
