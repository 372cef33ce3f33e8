#include "trlhpc/train/checkpoint/state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include "state_elements.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"

namespace trlhpc::checkpoint {
namespace {

uint64_t element_hash(int64_t index, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  uint64_t z = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(bits) << 17 | bits);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void add_checksum(int64_t* sums, std::span<const Hdf5Block> blocks, int64_t C, std::span<const float> data) {
  size_t i = 0;
  for (const Hdf5Block& b : blocks)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) {
        const uint64_t h = element_hash((b.row + r) * C + b.col + c, data[i++]);
        sums[0] += static_cast<int64_t>(h >> 32);
        sums[1] += static_cast<int64_t>(h & 0xffffffffu);
      }
}

std::string checksum_text(const int64_t* sums) {
  char text[40];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(sums[0]),
                static_cast<unsigned long long>(sums[1]));
  return text;
}

StateLayout state_layout(ParallelModel& model, AdamW& optimizer) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const bool primary = model.sharded_state().primary_owner();
  StateLayout layout;
  std::vector<int64_t> unit_length;   // elements of each unit's datasets
  std::vector<int> first_tensor;      // index of each unit's first tensor
  for (int u = 0; u < store.num_units(); ++u) {
    first_tensor.push_back(static_cast<int>(layout.tensors.size()));
    int64_t length = 0;
    for (const ParameterSlot& slot : store.unit(u).slots) {
      const Shape full = dataset_shape(slot.spec, tp.size);
      layout.tensors.push_back({slot.spec.name, full, u, length});
      length += shape_numel(full);
    }
    unit_length.push_back(length);
  }
  layout.num_sources = static_cast<int>(kStateKinds.size()) * store.num_units();
  int source = 0;
  for (size_t kind = 0; kind < kStateKinds.size(); ++kind) {
    for (int u = 0; u < store.num_units(); ++u, ++source) {
      StatePart part{std::string(kStateKinds[kind]) + "/" + unit_dataset_suffix(u),
                     unit_length[static_cast<size_t>(u)], static_cast<int>(kind), source, {}};
      const OptimizerRange range = optimizer.ranges()[static_cast<size_t>(u)];
      int tensor = first_tensor[static_cast<size_t>(u)];
      for (const Piece& p : pieces_of(store.unit(u), range.begin, range.end)) {
        // Only the primary copy is written, and of tp-replicated tensors the tp rank that counts them.
        if (p.lo < p.hi && primary && p.slot->spec.tp_counted_on(tp.rank))
          part.pieces.push_back({tensor, blocks_of(p, tp), p.lo - range.begin, p.hi - p.lo});
        ++tensor;
      }
      layout.parts.push_back(std::move(part));
    }
  }
  return layout;
}

HostValues copy_source(ParallelModel& model, AdamW& optimizer, const StateLayout& layout, int source) {
  const bool writes = std::any_of(layout.parts.begin(), layout.parts.end(),
                                  [&](const StatePart& p) { return p.source == source && !p.pieces.empty(); });
  if (!writes) return {};
  const int units = model.store().num_units();
  const int kind = source / units, u = source % units;
  const Tensor t = kind == 0 ? model.sharded_state().owned_params()[static_cast<size_t>(u)]
                    : kind == 1 ? optimizer.exp_avg()[static_cast<size_t>(u)]
                                : optimizer.exp_avg_sq()[static_cast<size_t>(u)];
  HostValues host{std::make_unique_for_overwrite<float[]>(static_cast<size_t>(t.numel())),
                  static_cast<size_t>(t.numel())};  // (end - begin) of the unit's range
  model.ops().copy_to_host(host.data.get(), t, host.size * sizeof(float));
  return host;
}

StateChecksums write_state(ParallelHdf5File& file, const StateLayout& layout, const StateSource& source) {
  for (const StatePart& part : layout.parts) file.create_dataset(part.dataset, Shape{part.length});
  const size_t T = layout.tensors.size();
  std::vector<int64_t> sums(2 * kStateKinds.size() * T, 0);
  std::vector<float> gathered;
  for (const StatePart& part : layout.parts) {
    if (part.pieces.empty()) continue;  // independent writes: nothing to take part in
    const std::span<const float> values = source(part.source);
    std::vector<Hdf5Slab> slabs;
    bool adjacent = true;  // the pieces' values follow one another in the source (unless tp skipped a tensor)
    for (size_t i = 0; i < part.pieces.size(); ++i) {
      const TensorPiece& piece = part.pieces[i];
      const StateTensor& tensor = layout.tensors[static_cast<size_t>(piece.tensor)];
      append_slabs(piece.blocks, tensor.shape.back(), tensor.offset, slabs);
      adjacent = adjacent && (i == 0 || piece.offset == part.pieces[i - 1].offset + part.pieces[i - 1].count);
      add_checksum(&sums[2 * (static_cast<size_t>(part.kind) * T + static_cast<size_t>(piece.tensor))], piece.blocks,
                   tensor.shape.back(), values.subspan(static_cast<size_t>(piece.offset), static_cast<size_t>(piece.count)));
    }
    const TensorPiece& first = part.pieces.front();
    const TensorPiece& last = part.pieces.back();
    std::span<const float> data = values.subspan(static_cast<size_t>(first.offset),
                                                 static_cast<size_t>(last.offset + last.count - first.offset));
    if (!adjacent) {  // one write still: the pieces' values gathered
      gathered.clear();
      for (const TensorPiece& piece : part.pieces) {
        const auto run = values.subspan(static_cast<size_t>(piece.offset), static_cast<size_t>(piece.count));
        gathered.insert(gathered.end(), run.begin(), run.end());
      }
      data = gathered;
    }
    file.write(part.dataset, slabs, data);
  }
  // The creates and writes are agreed on together, with the checksums' sums in the same all-reduce: a
  // rank whose create failed skips its writes (ParallelHdf5File::write), the writes of the others are
  // independent, so nothing waits on the failed rank before the agreement.
  file.agree_pending("creating and writing the state datasets", sums);
  StateChecksums checksums;
  for (size_t i = 0; i < kStateKinds.size() * T; ++i) checksums.push_back(checksum_text(&sums[2 * i]));
  return checksums;
}

nlohmann::json state_index_json(const StateLayout& layout, const StateChecksums& checksums) {
  TRLHPC_ASSERT(checksums.size() == kStateKinds.size() * layout.tensors.size(), "one checksum per kind and tensor");
  nlohmann::json datasets = nlohmann::json::object();
  for (const StatePart& part : layout.parts) datasets[part.dataset] = {{"shape", Shape{part.length}}};
  nlohmann::json tensors = nlohmann::json::object();
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    const StateTensor& tensor = layout.tensors[t];
    nlohmann::json sums = nlohmann::json::object();
    for (size_t kind = 0; kind < kStateKinds.size(); ++kind)
      sums[kStateKinds[kind]] = checksums[kind * layout.tensors.size() + t];
    tensors[tensor.name] = {{"unit", unit_dataset_suffix(tensor.unit)},
                            {"offset", tensor.offset},
                            {"shape", tensor.shape},
                            {"checksums", sums}};
  }
  return {{"datasets", datasets}, {"tensors", tensors}};
}

}  // namespace trlhpc::checkpoint
