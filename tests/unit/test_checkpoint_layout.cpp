// Checkpoint layout and manifest (train/checkpoint): the rectangles a tp slice's element range maps to
// cover exactly the full-tensor elements tensor_parallel.hpp says, in the same order; the manifest
// rules (committed folders, latest, format versions, identity) without MPI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

namespace trlhpc {
namespace {
namespace fs = std::filesystem;

ModelConfig small(int64_t kv_heads) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 4;
  c.vocab_size = 32;
  c.max_position_embeddings = 16;
  c.qkv_bias = c.o_bias = true;
  return c;
}

// Global flat indices of the blocks, row-major within each block, blocks in order.
std::vector<int64_t> expand(const std::vector<Hdf5Block>& blocks, int64_t C) {
  std::vector<int64_t> out;
  for (const Hdf5Block& b : blocks)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) out.push_back((b.row + r) * C + b.col + c);
  return out;
}

TEST(CheckpointLayout, BlocksCoverTheTpRunsInOrder) {
  std::mt19937_64 rng(3);
  int checked = 0;
  for (int64_t kv : {1, 2, 4})
    for (int tp : {1, 2, 4}) {
      const ModelConfig config = small(kv);
      for (int rank = 0; rank < tp; ++rank) {
        const TpLayout layout{tp, rank};
        for (const ParameterSpec& spec : parameter_specs(config, layout)) {
          const int64_t n = spec.numel(), C = checkpoint::dataset_shape(spec, tp).back();
          for (int trial = 0; trial < 6; ++trial) {
            int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
            int64_t end = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
            if (trial == 0) begin = 0, end = n;
            if (begin > end) std::swap(begin, end);
            std::vector<int64_t> want;
            for_each_tp_global_range(spec, layout, begin, end, [&](int64_t gb, int64_t ge, int64_t) {
              for (int64_t g = gb; g < ge; ++g) want.push_back(g);
            });
            const auto blocks = checkpoint::global_blocks(spec, layout, begin, end);
            ASSERT_EQ(expand(blocks, C), want) << spec.name << " tp " << tp << " rank " << rank << " [" << begin << ", " << end << ")";
            // Merged: never more rectangles than distinct runs of rows (a whole slice is a handful).
            if (trial == 0) EXPECT_LE(blocks.size(), 3u) << spec.name;
            ++checked;
          }
        }
      }
    }
  EXPECT_GT(checked, 100);
}

TEST(CheckpointLayout, WorkedExampleFromTheHeader) {
  // o_proj (C, NH*HS) = (4, 8): hidden 4, 2 heads of 4, row-parallel over tp 2; rank 1's local [2, 14).
  ModelConfig c = small(2);
  c.hidden_size = 4, c.num_attention_heads = 2, c.num_key_value_heads = 2, c.head_dim = 4;
  const TpLayout tp{2, 1};
  for (const ParameterSpec& spec : parameter_specs(c, tp)) {
    if (spec.name != "model.layers.0.self_attn.o_proj.weight") continue;
    const auto blocks = checkpoint::global_blocks(spec, tp, 2, 14);
    const std::vector<Hdf5Block> want = {{0, 6, 1, 2}, {1, 4, 2, 4}, {3, 4, 1, 2}};
    EXPECT_EQ(blocks, want);
    return;
  }
  FAIL() << "no o_proj";
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string manifest_text(int version) {
  return nlohmann::json{{"format", "trlhpc-checkpoint"}, {"format_version", version}, {"step", 4}}.dump();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointManifest, OnlyCommittedFoldersCountAndLatestIsTheNewest) {
  const fs::path out = testing::make_temp_dir("ckpt-manifest");
  EXPECT_NE(error_of([&] { checkpoint::resolve_checkpoint("latest", out.string()); }).find("holds no committed checkpoint"),
            std::string::npos);
  EXPECT_EQ(checkpoint::resolve_checkpoint("auto", out.string()), "");  // requeued before any save: fresh start
  for (int step : {2, 10, 9}) {
    write(out / ("checkpoint-" + std::to_string(step)) / "manifest.json", manifest_text(1));
    write(out / ("checkpoint-" + std::to_string(step)) / "state.h5", "");
  }
  write(out / "checkpoint-11.tmp" / "state.h5", "");           // an interrupted save
  fs::create_directories(out / "checkpoint-12");               // no manifest: not committed
  const auto all = checkpoint::committed_checkpoints(out.string());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.front().first, 2);
  EXPECT_EQ(all.back().first, 10);
  EXPECT_EQ(checkpoint::resolve_checkpoint("latest", out.string()), (out / "checkpoint-10").string());
  EXPECT_EQ(checkpoint::resolve_checkpoint("auto", out.string()), (out / "checkpoint-10").string());
  EXPECT_EQ(checkpoint::read_manifest((out / "checkpoint-10").string()).value("step", 0), 4);

  EXPECT_NE(error_of([&] { checkpoint::read_manifest((out / "checkpoint-12").string()); }).find("has no manifest.json"),
            std::string::npos);
  write(out / "future" / "manifest.json", manifest_text(7));
  write(out / "future" / "state.h5", "");
  EXPECT_NE(error_of([&] { checkpoint::read_manifest((out / "future").string()); }).find("format version 7"),
            std::string::npos);
  write(out / "nostate" / "manifest.json", manifest_text(1));
  EXPECT_NE(error_of([&] { checkpoint::read_manifest((out / "nostate").string()); }).find("no state.h5"), std::string::npos);
  write(out / "garbage" / "manifest.json", "{not json");
  EXPECT_NE(error_of([&] { checkpoint::read_manifest((out / "garbage").string()); }).find("not a trlhpc checkpoint"),
            std::string::npos);
  fs::remove_all(out);
}

TEST(CheckpointManifest, IdentityDifferencesAreNamed) {
  using json = nlohmann::json;
  const json saved = {{"parameters", json::array({json::array({"a", json::array({2, 3})})})},
                      {"model_config", {{"hidden_size", 8}}},
                                {"tokenizer_fingerprint", "aa"}, {"global_batch_size", 8}};
  nlohmann::json same = saved;
  same["global_batch_size"] = 8u;  // numbers compare by value, whatever their JSON type
  EXPECT_EQ(error_of([&] { checkpoint::require_same_identity("ck", saved, same); }), "");
  nlohmann::json shape = saved;
  shape["parameters"][0][1][1] = 4;
  EXPECT_NE(error_of([&] { checkpoint::require_same_identity("ck", saved, shape); }).find("another model shape"),
            std::string::npos);
  nlohmann::json tok = saved;
  tok["tokenizer_fingerprint"] = "bb";
  EXPECT_NE(error_of([&] { checkpoint::require_same_identity("ck", saved, tok); }).find("another tokenizer"),
            std::string::npos);
  nlohmann::json partial = saved;  // keys the caller does not pass are not compared (yet)
  partial.erase("global_batch_size");
  EXPECT_EQ(error_of([&] { checkpoint::require_same_identity("ck", saved, partial); }), "");
}

// Issue 30 item 6: another seed is named as the seed (it also changes the dataset's packing shuffle, so
// the dataset check would blame the data), and a checkpoint that records no seed or dataset (an earlier
// trlhpc) is refused saying so, not as "another seed".
TEST(CheckpointManifest, SeedIsNamedBeforeTheDataset) {
  using json = nlohmann::json;
  const json saved = {{"seed", 42}, {"dataset", {{"rows", 10}, {"content", "aaaa"}}}};
  json current = saved;
  current["seed"] = 7u;
  current["dataset"]["content"] = "bbbb";
  const std::string seed_error = error_of([&] { checkpoint::require_same_identity("ck", saved, current); });
  EXPECT_NE(seed_error.find("another --seed"), std::string::npos) << seed_error;
  EXPECT_NE(seed_error.find("seed: checkpoint 42, this run 7"), std::string::npos) << seed_error;
  current["seed"] = 42;
  const std::string data_error = error_of([&] { checkpoint::require_same_identity("ck", saved, current); });
  EXPECT_NE(data_error.find("another dataset (its rows, their order"), std::string::npos) << data_error;
  EXPECT_NE(data_error.find("dataset.content"), std::string::npos) << data_error;
  json old = saved;
  old.erase("seed");
  const std::string old_error = error_of([&] { checkpoint::require_same_identity("ck", old, saved); });
  EXPECT_NE(old_error.find("does not record its seed"), std::string::npos) << old_error;
}

// manifest.json must be the manifest written inside state.h5: an edited step is named with both values.
TEST(CheckpointManifest, ManifestFileIsCheckedAgainstTheEmbeddedCopy) {
  using json = nlohmann::json;
  const json embedded = {{"step", 4}, {"sampler", {{"epoch", 0}, {"step", 4}}}, {"identity", {{"seed", 42}}}};
  json file = json::parse(embedded.dump(1));  // as written and read back: equal
  EXPECT_EQ(error_of([&] { checkpoint::require_same_manifest("ck", file, embedded); }), "");
  file["step"] = 5;
  const std::string error = error_of([&] { checkpoint::require_same_manifest("ck", file, embedded); });
  EXPECT_NE(error.find("manifest.step: the copy in state.h5 4, manifest.json 5"), std::string::npos) << error;
  file = embedded;
  file["sampler"]["step"] = 1;
  EXPECT_NE(error_of([&] { checkpoint::require_same_manifest("ck", file, embedded); }).find("manifest.sampler.step"),
            std::string::npos);
}

TEST(CheckpointManifest, TokenizerFingerprintFollowsTheFiles) {
  const fs::path dir = testing::make_temp_dir("ckpt-tok");
  EXPECT_EQ(checkpoint::tokenizer_fingerprint(dir.string()), "");
  write(dir / "tokenizer.json", "{\"a\": 1}");
  const std::string one = checkpoint::tokenizer_fingerprint(dir.string());
  EXPECT_EQ(one.size(), 16u);
  write(dir / "tokenizer.json", "{\"a\": 2}");
  EXPECT_NE(checkpoint::tokenizer_fingerprint(dir.string()), one);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trlhpc
