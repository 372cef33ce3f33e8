// Checkpoints (train/checkpoint): a run saved after K steps and resumed continues exactly as the
// uninterrupted run, on the same layout bit for bit, on another layout or world size (resharded on
// load: each rank reads its slices) within fp32 rounding; a corrupted byte is a UserError naming the
// dataset, the same on every rank.
//
// Why 1e-5 relative across layouts: the resumed state is bit-identical (the same fp32 values are
// written and read back), so the only difference is the one every layout already has against the
// single process: the order of the reductions (data-parallel sums, tp partial sums), which the
// layout-equivalence tests bound by 1e-5 relative over 10 steps (measured <= 2e-6).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "same_message.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/train/checkpoint/async_save.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc {
namespace {

constexpr int64_t kSteps = 6, kSavedAt = 3, kGlobalRows = 8, kSeqLen = 16;

struct LayoutRun {
  ParallelDims dims;  // resolved by run_steps over the communicator it gets
  ShardingKind sharding = ShardingKind::None;
  std::string name() const { return dims.to_string() + ", " + sharding_name(sharding); }
};

// Global rows of step s dealt over the dp ranks, one micro-batch each.
std::vector<Batch> micro_batches(const ModelConfig& config, ParallelModel& model, int64_t step) {
  const int64_t D = model.groups().dp().size(), d = model.groups().dp().rank(), R = kGlobalRows / D;
  std::vector<Batch> rows;
  for (int64_t i = 0; i < R; ++i) rows.push_back(testing::synthetic_row(kSeqLen, config.vocab_size, 5, step, d * R + i));
  return {model.shard_tokens(testing::concat_rows(rows))};
}

// The same dir on every rank of `comm`: rank 0 makes it.
std::string shared_temp_dir(MPI_Comm comm, const std::string& tag) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string dir = rank == 0 ? testing::make_temp_dir(tag) : "";
  int length = static_cast<int>(dir.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  dir.resize(static_cast<size_t>(length));
  MPI_Bcast(dir.data(), length, MPI_CHAR, 0, comm);
  return dir;
}

// Trains steps [first, last) of the curve on `comm` laid out as `run`: from the initial weights when
// resume_dir is empty, else from that checkpoint. Saves after step kSavedAt into save_dir when given;
// `async`: in the background (AsyncCheckpointSaver), the later steps training while it is written.
std::vector<StepResult> run_steps(const ModelConfig& config, const UnitRangeSource& weights, const LayoutRun& run, MPI_Comm comm,
                                  const std::string& resume_dir, const std::string& save_dir, bool async = false) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const ParallelDims dims = run.dims.resolved(size).for_model(static_cast<int>(config.num_attention_heads),
                                                             static_cast<int>(config.num_key_value_heads));
  ProcessGroups groups(Mesh(dims), comm);
  auto ops = make_cpu_ops();
  TrainerOptions options;
  options.parallel.data_parallel.sharding = run.sharding;
  options.adamw.weight_decay = 0.1f;
  Trainer trainer(config, *ops, groups, options);
  const nlohmann::json identity = checkpoint::model_identity(config);
  int64_t first = 0;
  if (resume_dir.empty()) {
    trainer.model().load_weights(weights);
  } else {
    const nlohmann::json manifest = checkpoint::open_manifest(resume_dir, identity);
    first = checkpoint::load_checkpoint(resume_dir, manifest, trainer).step;
  }
  std::optional<checkpoint::AsyncCheckpointSaver> saver;
  if (async) saver.emplace(groups, kDefaultCollectiveTimeoutSeconds);
  std::vector<StepResult> curve;
  for (int64_t s = first; s < kSteps; ++s) {
    curve.push_back(trainer.step(micro_batches(config, trainer.model(), s), 1e-2));
    if (s + 1 == kSavedAt && !save_dir.empty()) {
      checkpoint::SaveRequest request;
      request.output_dir = save_dir;
      request.progress.step = s + 1;
      request.identity = identity;
      if (saver) saver->start(request, trainer);
      else checkpoint::save_checkpoint(request, trainer);
    }
  }
  if (saver) EXPECT_EQ(saver->wait(), checkpoint::checkpoint_dir(save_dir, kSavedAt));
  return curve;
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    dir_ = std::make_unique<HfModelDir>(testing::tests_dir() + "/golden/qwen2_tiny/model");
  }
  // The layouts the world can hold: DDP, ZeRO-3 and, on even worlds, tp 2 x ZeRO-2 and cp 2 x ZeRO-1.
  std::vector<LayoutRun> layouts() const {
    std::vector<LayoutRun> runs = {{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::None},
                             {ParallelDims{1, -1, 1, 1, 1}, ShardingKind::Zero3}};
    if (world_ % 2 == 0) {
      runs.push_back({ParallelDims{1, -1, 1, 1, 2}, ShardingKind::Zero2});
      runs.push_back({ParallelDims{1, -1, 2, 1, 1}, ShardingKind::Zero1});
    }
    return runs;
  }
  UnitRangeSource weights(TpLayout tp = {}) const { return weights_from_hf_dir(*dir_, tp); }
  int world_ = 1, rank_ = 0;
  std::unique_ptr<HfModelDir> dir_;
};

TEST_F(Checkpoint, SameLayoutResumesBitForBit) {
  const ModelConfig& config = dir_->config();
  for (const LayoutRun& run : layouts()) {
    SCOPED_TRACE(run.name());
    const std::string out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-same");
    const TpLayout tp{run.dims.tp, rank_ % run.dims.tp};  // tp varies fastest over the world ranks
    const std::vector<StepResult> whole = run_steps(config, weights(tp), run, MPI_COMM_WORLD, "", out);
    const std::string saved = checkpoint::checkpoint_dir(out, kSavedAt);
    const std::vector<StepResult> resumed = run_steps(config, weights(tp), run, MPI_COMM_WORLD, saved, "");
    ASSERT_EQ(resumed.size(), static_cast<size_t>(kSteps - kSavedAt));
    for (size_t i = 0; i < resumed.size(); ++i) {
      const StepResult& a = whole[static_cast<size_t>(kSavedAt) + i];
      EXPECT_EQ(resumed[i].loss, a.loss) << "step " << kSavedAt + static_cast<int64_t>(i) + 1;
      EXPECT_EQ(resumed[i].grad_norm, a.grad_norm) << "step " << kSavedAt + static_cast<int64_t>(i) + 1;
    }
    EXPECT_LT(whole.back().loss, whole.front().loss);  // the curve moves: resuming is not trivially equal
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) std::filesystem::remove_all(out);
  }
}

// --async_save: the checkpoint holds the state of the step it was taken at although later steps change
// the parameters while it is written: its tensors (checksums of every dataset) equal the synchronous
// save's, and resuming from it is bit-identical.
TEST_F(Checkpoint, AsyncSaveHoldsTheStateOfItsStep) {
  const ModelConfig& config = dir_->config();
  for (const LayoutRun& run : layouts()) {
    SCOPED_TRACE(run.name());
    const std::string sync_out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-sync");
    const std::string async_out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-async");
    const TpLayout tp{run.dims.tp, rank_ % run.dims.tp};
    const std::vector<StepResult> whole = run_steps(config, weights(tp), run, MPI_COMM_WORLD, "", sync_out);
    const std::vector<StepResult> whole_async = run_steps(config, weights(tp), run, MPI_COMM_WORLD, "", async_out, true);
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(whole_async[i].loss, whole[i].loss) << "step " << i + 1;
    const std::string sync_dir = checkpoint::checkpoint_dir(sync_out, kSavedAt);
    const std::string async_dir = checkpoint::checkpoint_dir(async_out, kSavedAt);
    const nlohmann::json sync_manifest = checkpoint::read_manifest(sync_dir);
    const nlohmann::json async_manifest = checkpoint::read_manifest(async_dir);
    EXPECT_EQ(async_manifest.at("datasets"), sync_manifest.at("datasets"));
    EXPECT_EQ(async_manifest.at("tensors"), sync_manifest.at("tensors"));  // the index, with every checksum
    EXPECT_EQ(async_manifest.at("optimizer_step"), sync_manifest.at("optimizer_step"));
    const std::vector<StepResult> resumed = run_steps(config, weights(tp), run, MPI_COMM_WORLD, async_dir, "");
    ASSERT_EQ(resumed.size(), static_cast<size_t>(kSteps - kSavedAt));
    for (size_t i = 0; i < resumed.size(); ++i)
      EXPECT_EQ(resumed[i].loss, whole[static_cast<size_t>(kSavedAt) + i].loss) << "step " << kSavedAt + static_cast<int64_t>(i) + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
      std::filesystem::remove_all(sync_out);
      std::filesystem::remove_all(async_out);
    }
  }
}

TEST_F(Checkpoint, AnotherLayoutOrWorldSizeContinuesTheCurve) {
  const ModelConfig& config = dir_->config();
  // Saved on the whole world as ZeRO-3 (or tp 2 x ZeRO-2 on even worlds) ...
  const LayoutRun saved_as = world_ % 2 == 0 ? LayoutRun{ParallelDims{1, -1, 1, 1, 2}, ShardingKind::Zero2}
                                        : LayoutRun{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::Zero3};
  const std::string out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-reshard");
  const std::vector<StepResult> whole = run_steps(
      config, weights(TpLayout{saved_as.dims.tp, rank_ % saved_as.dims.tp}), saved_as, MPI_COMM_WORLD, "", out);
  const std::string saved = checkpoint::checkpoint_dir(out, kSavedAt);
  // ... resumed by one process alone (DDP over one rank), and on the world as DDP and as ZeRO-3.
  std::vector<std::pair<LayoutRun, MPI_Comm>> resumes = {{LayoutRun{ParallelDims{}, ShardingKind::None}, MPI_COMM_SELF},
                                                   {LayoutRun{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::None}, MPI_COMM_WORLD},
                                                   {LayoutRun{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::Zero3}, MPI_COMM_WORLD}};
  double worst = 0;
  for (const auto& [run, comm] : resumes) {
    SCOPED_TRACE(run.name() + (comm == MPI_COMM_SELF ? " on one rank" : " on the world"));
    const std::vector<StepResult> resumed = run_steps(config, weights(), run, comm, saved, "");
    ASSERT_EQ(resumed.size(), static_cast<size_t>(kSteps - kSavedAt));
    for (size_t i = 0; i < resumed.size(); ++i) {
      const StepResult& a = whole[static_cast<size_t>(kSavedAt) + i];
      const double dl = testing::relative_difference(resumed[i].loss, a.loss);
      const double dn = testing::relative_difference(resumed[i].grad_norm, a.grad_norm);
      worst = std::max({worst, dl, dn});
      EXPECT_LE(dl, 1e-5) << "step " << kSavedAt + static_cast<int64_t>(i) + 1;
      EXPECT_LE(dn, 1e-5) << "step " << kSavedAt + static_cast<int64_t>(i) + 1;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank_ == 0) std::printf("[ measured ] resumed on other layouts: worst relative difference %.3g\n", worst);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) std::filesystem::remove_all(out);
}

// Flips one byte of tensor `name` of `kind` in checkpoint `dir` (rank 0): its dataset and element come
// from the manifest's index (format 2), the dataset's file offset from serial HDF5.
void corrupt(const std::string& dir, const std::string& kind, const std::string& name) {
  const nlohmann::json entry = checkpoint::read_manifest(dir).at("tensors").at(name);
  const std::string dataset = kind + "/" + entry.at("unit").get<std::string>();
  const std::string file = dir + "/state.h5";
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(offset, HADDR_UNDEF);
  const auto at = static_cast<std::streamoff>(offset + 4 * entry.at("offset").get<uint64_t>() + 5);
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(at);
  char byte = 0;
  io.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  io.seekp(at);
  io.write(&byte, 1);
}

// Format 2 (issue 30: a save across nodes was latency-bound by one collective dataset creation per
// tensor and kind): state.h5 holds one dataset per unit and kind and the manifest copy, nothing else,
// and the index places every tensor of the model, one after another in its unit.
TEST_F(Checkpoint, OneDatasetPerUnitAndKind) {
  const ModelConfig& config = dir_->config();
  const LayoutRun run = world_ % 2 == 0 ? LayoutRun{ParallelDims{1, -1, 1, 1, 2}, ShardingKind::Zero2}
                                        : LayoutRun{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::Zero3};
  const std::string out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-units");
  run_steps(config, weights(TpLayout{run.dims.tp, rank_ % run.dims.tp}), run, MPI_COMM_WORLD, "", out);
  const std::string saved = checkpoint::checkpoint_dir(out, kSavedAt);
  if (rank_ == 0) {
    const int64_t units = config.num_hidden_layers + 2;
    const hid_t f = H5Fopen((saved + "/state.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5G_info_t info{};
    ASSERT_GE(H5Gget_info(f, &info), 0);
    EXPECT_EQ(info.nlinks, 4u);  // params, exp_avg, exp_avg_sq, trlhpc_manifest
    for (const char* kind : {"params", "exp_avg", "exp_avg_sq"}) {
      ASSERT_GE(H5Gget_info_by_name(f, kind, &info, H5P_DEFAULT), 0) << kind;
      EXPECT_EQ(static_cast<int64_t>(info.nlinks), units) << kind;
    }
    H5Fclose(f);
    const nlohmann::json manifest = checkpoint::read_manifest(saved);
    EXPECT_EQ(manifest.at("format_version"), 2);
    std::map<std::string, int64_t> next;  // unit -> where its next tensor starts
    for (const ParameterSpec& spec : parameter_specs(config)) {
      SCOPED_TRACE(spec.name);
      const nlohmann::json& entry = manifest.at("tensors").at(spec.name);
      EXPECT_EQ(entry.at("shape").get<Shape>(), spec.shape);
      const std::string unit = entry.at("unit").get<std::string>();
      EXPECT_EQ(unit, "unit-" + std::to_string(spec.unit));
      EXPECT_EQ(entry.at("offset").get<int64_t>(), next[unit]);
      next[unit] += shape_numel(spec.shape);
    }
    for (const auto& [unit, length] : next)
      EXPECT_EQ(manifest.at("datasets").at("params/" + unit).at("shape"), nlohmann::json::array({length})) << unit;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) std::filesystem::remove_all(out);
}

TEST_F(Checkpoint, CorruptedByteNamesTheDatasetOnEveryRank) {
  const ModelConfig& config = dir_->config();
  const LayoutRun run{ParallelDims{1, -1, 1, 1, 1}, ShardingKind::Zero3};
  const std::string out = shared_temp_dir(MPI_COMM_WORLD, "ckpt-corrupt");
  run_steps(config, weights(), run, MPI_COMM_WORLD, "", out);
  const std::string saved = checkpoint::checkpoint_dir(out, kSavedAt);
  for (const auto& [kind, name] : {std::pair<std::string, std::string>{"params", "model.layers.1.mlp.up_proj.weight"},
                                   {"exp_avg_sq", "model.norm.weight"}}) {
    SCOPED_TRACE(kind + "/" + name);
    if (rank_ == 0) corrupt(saved, kind, name);
    MPI_Barrier(MPI_COMM_WORLD);
    std::string message;
    try {
      run_steps(config, weights(), run, MPI_COMM_WORLD, saved, "");
    } catch (const UserError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("tensor " + kind + "/" + name + " (in dataset " + kind + "/unit-"), std::string::npos) << message;
    EXPECT_NE(message.find("does not match its checksum"), std::string::npos) << message;
    testing::expect_identical_on_every_rank(message);
    if (rank_ == 0) corrupt(saved, kind, name);  // flips the byte back
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Mended: it resumes again.
  EXPECT_EQ(run_steps(config, weights(), run, MPI_COMM_WORLD, saved, "").size(), static_cast<size_t>(kSteps - kSavedAt));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace trlhpc
