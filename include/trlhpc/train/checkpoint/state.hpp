#pragma once
// The tensors of a checkpoint in state.h5 (format 2, state_index.hpp): for each parameter unit one 1-D
// dataset per kind, params/unit-U (fp32 master weights), exp_avg/unit-U and exp_avg_sq/unit-U (AdamW
// moments), holding the unit's tensors in their full shapes one after another. Every rank writes only
// the elements it owns (its optimizer ranges, mapped through its tp slice: layout.hpp), and of those
// only when it holds the primary copy (DataParallelStrategy::primary_owner) of an element its tp rank
// counts (ParameterSpec::tp_counted_on): every element is written exactly once, by one rank, and no
// rank ever holds more than its own share. One write per rank and dataset: a ZeRO shard of a unit is
// one contiguous run. Reading is the converse on any layout: each rank reads exactly what it holds,
// from format 2 or from the one-dataset-per-tensor format 1 (StateIndex says where each tensor is).
//
// Checksums: per kind and tensor, the sum over its elements of splitmix64(element index in the tensor's
// full shape, value bits), split in two 32-bit halves summed in int64 (no overflow below 2^31
// elements). Order- and layout-independent, so the writers' partial sums add up to the same value a
// reader on another layout adds up from the elements it is primary for; a changed byte changes the sum
// of its tensor. (The same definition as format 1's per-dataset checksums.)
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/io/file_region_writer.hpp"
#include "trlhpc/io/hdf5/hdf5_preallocated_file.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"
#include "trlhpc/train/checkpoint/state_index.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc::checkpoint {

// One tensor of the checkpoint: its full shape and where it lies in its unit's datasets.
struct StateTensor {
  std::string name;
  Shape shape;          // full (global) shape
  int unit = 0;
  int64_t offset = 0;   // first element in the unit's datasets
};

// What one rank writes of one tensor of a dataset: its rectangles of the tensor (layout.hpp) and where
// their values lie in the dataset's host source.
struct TensorPiece {
  int tensor = 0;  // index into StateLayout::tensors
  std::vector<Hdf5Block> blocks;
  int64_t offset = 0, count = 0;  // values [offset, offset + count) of the source
};

// What one rank writes of one dataset (kind, unit): its pieces (none when it writes nothing there), their
// values taken from one host source (a host copy of the unit's params, exp_avg or exp_avg_sq over the
// rank's optimizer range of that unit).
struct StatePart {
  std::string dataset;  // KIND/unit-U
  int64_t length = 0;   // elements of the dataset (its unit's tensors in full)
  int kind = 0;         // index into kStateKinds
  int source = 0;       // index of the host source
  std::vector<TensorPiece> pieces;
};

// Everything a rank writes, in the order every rank writes it (one part per dataset). Plain data:
// built on the training thread, it can be written from another one while training goes on.
struct StateLayout {
  std::vector<StateTensor> tensors;
  std::vector<StatePart> parts;
  int num_sources = 0;
  bool model_only = false;  // --save_only_model: params datasets only, no AdamW moments
};

// `model_only`: the params datasets alone (TrainingArguments' save_only_model).
StateLayout state_layout(ParallelModel& model, AdamW& optimizer, bool model_only = false);

// A host copy of one source, allocated without zero-filling (the copy writes every element: one pass
// over fresh pages instead of two).
struct HostValues {
  std::unique_ptr<float[]> data;
  size_t size = 0;
  std::span<const float> span() const { return {data.get(), size}; }
};

// Host copy of source `source` (what StatePart::source names); empty when this rank writes nothing
// of it (a replica that does not hold the primary copy).
HostValues copy_source(ParallelModel& model, AdamW& optimizer, const StateLayout& layout, int source);

// The values of a source, on the host, for write_state.
using StateSource = std::function<std::span<const float>(int source)>;

// Checksums per kind and tensor: checksums[kind * tensors.size() + tensor].
using StateChecksums = std::vector<std::string>;

// The datasets of state.h5 for create_preallocated_hdf5 (rank 0 lays the file out before any rank
// writes): one float32 dataset per part of `layout`, in its order, then kEmbeddedManifest, the manifest's
// text (`manifest_bytes` long; its checksums are fixed-width, so its length is known before they are).
std::vector<Hdf5PlannedDataset> state_file_datasets(const StateLayout& layout, int64_t manifest_bytes);
// This rank's share of the state datasets, written into the file rank 0 laid out: `offsets[i]` is the
// byte offset of layout.parts[i]'s dataset (create_preallocated_hdf5's answer). Values are taken from
// `source` (asked for the sources in ascending order); the rank's partial checksums are added to `sums`
// (two per kind and tensor, [kind * tensors.size() + tensor]; summed over the ranks by the caller).
// Local: no collective. Throws RuntimeFailure on an I/O error (the caller agrees on it).
void write_state(FileRegionWriter& file, std::span<const int64_t> offsets, const StateLayout& layout,
                 const StateSource& source, std::span<int64_t> sums);
// The checksums (per kind and tensor) of `sums` as write_state added them up over every rank.
StateChecksums state_checksums(const StateLayout& layout, std::span<const int64_t> sums);
// The manifest's "datasets" and "tensors" (the index, state_index.hpp) of `layout` with `checksums`:
// {"datasets": {...}, "tensors": {...}}.
nlohmann::json state_index_json(const StateLayout& layout, const StateChecksums& checksums);

// Collective: fills the model's parameters (through its strategy, so any sharding) from the params
// datasets `index` names, checking every tensor's checksum. UserError naming the tensor on a mismatch,
// the same on every rank.
void read_parameters(ParallelHdf5File& file, ParallelModel& model, const StateIndex& index);

// Collective: fills the optimizer's moments from exp_avg and exp_avg_sq, checking their checksums.
void read_optimizer_state(ParallelHdf5File& file, ParallelModel& model, AdamW& optimizer, const StateIndex& index);

}  // namespace trlhpc::checkpoint
