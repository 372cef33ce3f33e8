#pragma once
// The tensors of a checkpoint in state.h5: params/NAME (fp32 master weights), exp_avg/NAME and
// exp_avg_sq/NAME (AdamW moments), each of the parameter's full shape. Every rank writes only the
// elements it owns (its optimizer ranges, mapped through its tp slice: layout.hpp), and of those only
// when it holds the primary copy (DataParallelStrategy::primary_owner) of an element its tp rank
// counts (ParameterSpec::tp_counted_on): every element is written exactly once, by one rank, and no
// rank ever holds more than its own share. Reading is the converse on any layout: each rank reads
// exactly what it holds.
//
// Checksums: per dataset, the sum over its elements of splitmix64(global index, value bits), split in
// two 32-bit halves summed in int64 (no overflow below 2^31 elements). Order- and layout-independent,
// so the writers' partial sums add up to the same value a reader on another layout adds up from the
// elements it is primary for; a changed byte changes the sum of its dataset.
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/parallel/parallel_hdf5.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc::checkpoint {

// What one rank writes of one dataset: its blocks (none when it writes nothing there) and where their
// values lie in one host source (a host copy of one unit of params, exp_avg or exp_avg_sq, over the
// rank's optimizer range of that unit).
struct StatePart {
  std::string dataset;
  Shape shape;                     // the dataset's global shape
  int source = 0;                  // index of the host source
  std::vector<Hdf5Block> blocks;
  int64_t offset = 0, count = 0;   // values [offset, offset + count) of the source
};

// Everything a rank writes, in the order every rank writes it (one part per dataset). Plain data:
// built on the training thread, it can be written from another one while training goes on.
struct StateLayout {
  std::vector<StatePart> parts;
  int num_sources = 0;
};

StateLayout state_layout(ParallelModel& model, AdamW& optimizer);

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

// Collective over the file's group: creates and writes every dataset of `layout`, taking values from
// `source` (asked for the sources in ascending order). Returns {dataset name: {"shape": [...],
// "checksum": "..."}} for the manifest (the same on every rank).
nlohmann::json write_state(ParallelHdf5File& file, Communicator& comm, const StateLayout& layout,
                           const StateSource& source);

// Collective: fills the model's parameters (through its strategy, so any sharding) from params/,
// checking every params/ dataset's checksum against `datasets` (the manifest's). UserError naming the
// dataset on a mismatch, the same on every rank.
void read_parameters(ParallelHdf5File& file, ParallelModel& model, const nlohmann::json& datasets);

// Collective: fills the optimizer's moments from exp_avg/ and exp_avg_sq/, checking their checksums.
void read_optimizer_state(ParallelHdf5File& file, ParallelModel& model, AdamW& optimizer, const nlohmann::json& datasets);

}  // namespace trlhpc::checkpoint
