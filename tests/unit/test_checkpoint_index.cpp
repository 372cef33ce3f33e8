// Checkpoint format 2 without MPI (train/checkpoint/layout.hpp, state_index.hpp): a rank's rectangles
// of a tensor become slabs of its unit's 1-D dataset covering exactly the same elements in the same
// order; the manifest's tensor index is refused, naming manifest.json and the entry, whenever it is
// missing or damaged; format 1 manifests locate each tensor in its own dataset.
#include <gtest/gtest.h>

#include <random>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"
#include "trlhpc/train/checkpoint/state_index.hpp"

namespace trlhpc {
namespace {

std::vector<int64_t> expand(const std::vector<Hdf5Slab>& slabs) {
  std::vector<int64_t> out;
  for (const Hdf5Slab& s : slabs)
    for (int64_t i = 0; i < s.count; ++i)
      for (int64_t j = 0; j < s.block; ++j) out.push_back(s.start + i * s.stride + j);
  return out;
}

TEST(CheckpointIndex, WorkedExamplesFromTheLayoutHeader) {
  // o_proj (4, 8) row-parallel, tp rank 1's local [2, 14), the tensor stored from element 100.
  std::vector<Hdf5Slab> slabs;
  const std::vector<Hdf5Block> o_proj = {{0, 6, 1, 2}, {1, 4, 2, 4}, {3, 4, 1, 2}};
  checkpoint::append_slabs(o_proj, 8, 100, slabs);
  EXPECT_EQ(slabs, (std::vector<Hdf5Slab>{{106, 2, 1, 2}, {112, 8, 2, 4}, {128, 2, 1, 2}}));
  // A ZeRO shard of an unsplit (4, 4): elements [2, 14) from 100 are one run.
  slabs.clear();
  const std::vector<Hdf5Block> shard = {{0, 2, 1, 2}, {1, 0, 2, 4}, {3, 0, 1, 2}};
  checkpoint::append_slabs(shard, 4, 100, slabs);
  EXPECT_EQ(slabs, (std::vector<Hdf5Slab>{{102, 12, 1, 12}}));
  // A shard to the tensor's end, [2, 16): the next tensor of the unit, from 116, continues the run.
  slabs.clear();
  const std::vector<Hdf5Block> to_end = {{0, 2, 1, 2}, {1, 0, 3, 4}};
  checkpoint::append_slabs(to_end, 4, 100, slabs);
  EXPECT_EQ(slabs, (std::vector<Hdf5Slab>{{102, 14, 1, 14}}));
  const std::vector<Hdf5Block> next = {{0, 0, 1, 5}};
  checkpoint::append_slabs(next, 5, 116, slabs);
  EXPECT_EQ(slabs, (std::vector<Hdf5Slab>{{102, 19, 1, 19}}));
}

// Every tp slice and random element range of every tensor of a unit, laid out one after another: the
// slabs hold exactly the elements of the rectangles at the tensor's offset, ascending, each slab past the
// previous one's last element (what ParallelHdf5File requires).
TEST(CheckpointIndex, SlabsCoverTheBlocksInOrder) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 1, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.head_dim = 4, c.vocab_size = 32, c.max_position_embeddings = 16;
  c.qkv_bias = c.o_bias = true;
  std::mt19937_64 rng(5);
  for (int tp : {1, 2, 4})
    for (int rank = 0; rank < tp; ++rank) {
      const TpLayout layout{tp, rank};
      std::vector<Hdf5Slab> slabs;
      std::vector<int64_t> want;
      int64_t base = 0;
      for (const ParameterSpec& spec : parameter_specs(c, layout)) {
        const Shape full = checkpoint::dataset_shape(spec, tp);
        const int64_t n = spec.numel(), C = full.back();
        int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
        int64_t end = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
        if (begin > end) std::swap(begin, end);
        if (rng() % 2) begin = 0, end = n;  // whole slices too: the runs across tensors join
        const auto blocks = checkpoint::global_blocks(spec, layout, begin, end);
        for (const Hdf5Block& b : blocks)
          for (int64_t r = 0; r < b.rows; ++r)
            for (int64_t k = 0; k < b.cols; ++k) want.push_back(base + (b.row + r) * C + b.col + k);
        checkpoint::append_slabs(blocks, C, base, slabs);
        base += shape_numel(full);
      }
      ASSERT_EQ(expand(slabs), want) << "tp " << tp << " rank " << rank;
      for (size_t i = 1; i < slabs.size(); ++i) EXPECT_GT(slabs[i].start, slabs[i - 1].last()) << i;
      for (const Hdf5Slab& s : slabs) EXPECT_TRUE(s.count == 1 || s.stride >= s.block);
      if (tp == 1) EXPECT_LE(slabs.size(), 12u);  // unsplit: few runs, not one per row
    }
}

// A format-2 manifest of one unit holding a (2, 3) and a (4) tensor, as trlhpc writes it.
nlohmann::json manifest_v2() {
  nlohmann::json datasets, tensors;
  for (const char* kind : checkpoint::kStateKinds) datasets[std::string(kind) + "/unit-0"] = {{"shape", {10}}};
  const nlohmann::json sums = {{"params", "a"}, {"exp_avg", "b"}, {"exp_avg_sq", "c"}};
  tensors["w"] = {{"unit", "unit-0"}, {"offset", 0}, {"shape", {2, 3}}, {"checksums", sums}};
  tensors["b"] = {{"unit", "unit-0"}, {"offset", 6}, {"shape", {4}}, {"checksums", sums}};
  return {{"format", "trlhpc-checkpoint"}, {"format_version", 2}, {"datasets", datasets}, {"tensors", tensors}};
}

std::string error_of(const nlohmann::json& manifest) {
  try {
    checkpoint::StateIndex::from_manifest("out/checkpoint-4", manifest);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointIndex, LocatesTensorsOfBothFormats) {
  const auto index = checkpoint::StateIndex::from_manifest("out/checkpoint-4", manifest_v2());
  const checkpoint::TensorLocation b = index.locate("exp_avg", "b");
  EXPECT_EQ(b.dataset, "exp_avg/unit-0");
  EXPECT_TRUE(b.packed);
  EXPECT_EQ(b.offset, 6);
  EXPECT_EQ(b.shape, (Shape{4}));
  EXPECT_EQ(b.checksum, "b");
  EXPECT_EQ(index.packed_dataset_shape("exp_avg/unit-0"), (Shape{10}));
  try {
    index.locate("params", "model.norm.weight");
    ADD_FAILURE() << "no error for a tensor the index lacks";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("out/checkpoint-4/manifest.json: the tensor index (\"tensors\") has no entry for "
                                         "model.norm.weight"),
              std::string::npos)
        << e.what();
  }
  // Format 1: a dataset per tensor and kind, the checksum from "datasets".
  const nlohmann::json v1 = {{"format", "trlhpc-checkpoint"}, {"format_version", 1},
                             {"datasets", {{"params/w", {{"shape", {2, 3}}, {"checksum", "x"}}}}}};
  const auto old = checkpoint::StateIndex::from_manifest("out/checkpoint-4", v1);
  const checkpoint::TensorLocation w = old.locate("params", "w");
  EXPECT_EQ(w.dataset, "params/w");
  EXPECT_FALSE(w.packed);
  EXPECT_EQ(w.checksum, "x");
  EXPECT_EQ(old.locate("exp_avg", "w").checksum, "");  // absent: the check then fails
}

TEST(CheckpointIndex, DamagedIndexIsRefusedNamingTheManifest) {
  EXPECT_EQ(error_of(manifest_v2()), "");
  const std::string file = "checkpoint out/checkpoint-4: out/checkpoint-4/manifest.json ";
  struct Case {
    std::function<void(nlohmann::json&)> damage;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& m) { m.erase("tensors"); }, "has no tensor index (\"tensors\", an object; format version 2)"},
      {[](nlohmann::json& m) { m["tensors"] = nlohmann::json::array(); }, "has no tensor index"},
      {[](nlohmann::json& m) { m["tensors"]["w"] = 3; }, "tensor index entry \"w\" is not an object"},
      {[](nlohmann::json& m) { m["tensors"]["w"].erase("unit"); }, "entry \"w\" has no \"unit\" of the form \"unit-N\""},
      {[](nlohmann::json& m) { m["tensors"]["w"]["unit"] = "../params"; }, "entry \"w\" has no \"unit\""},
      {[](nlohmann::json& m) { m["tensors"]["w"]["offset"] = -1; }, "entry \"w\" has no \"offset\""},
      {[](nlohmann::json& m) { m["tensors"]["w"]["offset"] = "0"; }, "entry \"w\" has no \"offset\""},
      {[](nlohmann::json& m) { m["tensors"]["w"]["shape"] = {2, 3, 1}; }, "entry \"w\" has no \"shape\" of one or two"},
      {[](nlohmann::json& m) { m["tensors"]["w"]["shape"] = {2, 0}; }, "entry \"w\": \"shape\" holds 0"},
      {[](nlohmann::json& m) { m["tensors"]["w"]["shape"] = {1 << 30, 1 << 30}; }, "more than 2^40 elements"},
      {[](nlohmann::json& m) { m["tensors"]["w"]["checksums"].erase("exp_avg_sq"); },
       "entry \"w\" has no \"checksums\" entry \"exp_avg_sq\""},
      {[](nlohmann::json& m) { m["datasets"].erase("exp_avg/unit-0"); },
       "is in unit unit-0, but \"datasets\" has no 1-D \"exp_avg/unit-0\""},
      {[](nlohmann::json& m) { m["datasets"]["params/unit-0"]["shape"] = {2, 5}; }, "has no 1-D \"params/unit-0\""},
      {[](nlohmann::json& m) { m["tensors"]["b"]["offset"] = 7; },
       "entry \"b\" ends at element 11, past the end of dataset params/unit-0 (10 elements)"},
      {[](nlohmann::json& m) { m["tensors"]["b"]["offset"] = 5; }, "two tensors of unit-0 overlap at element 5"},
  };
  for (const Case& c : cases) {
    nlohmann::json m = manifest_v2();
    c.damage(m);
    const std::string message = error_of(m);
    EXPECT_EQ(message.rfind(file, 0), 0u) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_NE(message.find("the manifest is damaged: resume from another checkpoint"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace trlhpc
