#include "trlhpc/train/checkpoint/state.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <span>

#include "state_elements.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"

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

StateLayout state_layout(ParallelModel& model, AdamW& optimizer, bool model_only) {
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
  layout.model_only = model_only;
  const size_t kinds = model_only ? 1 : kStateKinds.size();  // kStateKinds[0] is params
  int source = 0;
  for (size_t kind = 0; kind < kinds; ++kind) {
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

std::vector<Hdf5PlannedDataset> state_file_datasets(const StateLayout& layout, int64_t manifest_bytes) {
  std::vector<Hdf5PlannedDataset> datasets;
  for (const StatePart& part : layout.parts) datasets.push_back({part.dataset, part.length});
  datasets.push_back({kEmbeddedManifest, manifest_bytes, Hdf5PlannedDataset::Type::Byte});
  return datasets;
}

void write_state(FileRegionWriter& file, std::span<const int64_t> offsets, const StateLayout& layout,
                 const StateSource& source, std::span<int64_t> sums) {
  static_assert(std::endian::native == std::endian::little, "state.h5 holds little-endian float32 (H5T_IEEE_F32LE)");
  TRLHPC_ASSERT(offsets.size() >= layout.parts.size(), "one offset per state dataset");
  const size_t T = layout.tensors.size();
  TRLHPC_ASSERT(sums.size() == 2 * kStateKinds.size() * T, "two sums per kind and tensor");
  std::vector<Hdf5Slab> slabs;
  for (size_t p = 0; p < layout.parts.size(); ++p) {
    const StatePart& part = layout.parts[p];
    if (part.pieces.empty()) continue;
    const std::span<const float> values = source(part.source);
    const int64_t base = offsets[p];
    for (const TensorPiece& piece : part.pieces) {
      const StateTensor& tensor = layout.tensors[static_cast<size_t>(piece.tensor)];
      const std::span<const float> run = values.subspan(static_cast<size_t>(piece.offset), static_cast<size_t>(piece.count));
      add_checksum(&sums[2 * (static_cast<size_t>(part.kind) * T + static_cast<size_t>(piece.tensor))], piece.blocks,
                   tensor.shape.back(), run);
      // The piece's slabs of the dataset, in its values' order (row-major, as HDF5 reads them back);
      // consecutive runs that continue each other in the file and in memory become one pwrite.
      slabs.clear();
      append_slabs(piece.blocks, tensor.shape.back(), tensor.offset, slabs);
      const float* next = run.data();
      for (const Hdf5Slab& slab : slabs)
        for (int64_t r = 0; r < slab.count; ++r, next += slab.block)
          file.write(base + 4 * (slab.start + r * slab.stride), next, 4 * static_cast<size_t>(slab.block));
      TRLHPC_ASSERT(next == run.data() + run.size(), "the slabs of a piece of " + part.dataset + " cover its values");
    }
    file.flush();  // the source's values may be gone at the next source() call (one unit held at a time)
  }
}

StateChecksums state_checksums(const StateLayout& layout, std::span<const int64_t> sums) {
  TRLHPC_ASSERT(sums.size() == 2 * kStateKinds.size() * layout.tensors.size(), "two sums per kind and tensor");
  StateChecksums checksums;
  for (size_t i = 0; i < sums.size() / 2; ++i) checksums.push_back(checksum_text(&sums[2 * i]));
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
    for (size_t kind = 0; kind < (layout.model_only ? 1 : kStateKinds.size()); ++kind)
      sums[kStateKinds[kind]] = checksums[kind * layout.tensors.size() + t];
    tensors[tensor.name] = {{"unit", unit_dataset_suffix(tensor.unit)},
                            {"offset", tensor.offset},
                            {"shape", tensor.shape},
                            {"checksums", sums}};
  }
  return {{"datasets", datasets}, {"tensors", tensors}};
}

}  // namespace trlhpc::checkpoint
