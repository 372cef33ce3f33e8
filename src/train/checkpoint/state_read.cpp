// Reading a checkpoint's tensors (state.hpp) on any layout, from format 2 (a dataset per unit and kind)
// or format 1 (a dataset per tensor and kind): StateIndex says where each tensor lies.
#include <set>
#include <span>

#include "state_elements.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/checkpoint/state.hpp"

namespace trlhpc::checkpoint {
namespace {

// How a checksum mismatch names the tensor: format 1's dataset is the tensor's.
std::string tensor_label(const std::string& kind, const std::string& name, const TensorLocation& at) {
  return at.packed ? "tensor " + kind + "/" + name + " (in dataset " + at.dataset + ")" : "dataset " + at.dataset;
}

// Where every tensor of `kinds` lies (kind by kind, then unit and slot order), each dataset opened and
// its shape checked against this model's tensors and the index (collective, in the same order on every
// rank).
std::vector<TensorLocation> open_all(ParallelHdf5File& file, const StateIndex& index, ParameterStore& store, TpLayout tp,
                                     std::initializer_list<const char*> kinds) {
  std::vector<TensorLocation> locations;
  std::set<std::string> opened;
  for (const char* kind : kinds)
    for (const ParameterUnit& unit : store.units())
      for (const ParameterSlot& slot : unit.slots) {
        TensorLocation at = index.locate(kind, slot.spec.name);
        const Shape want = dataset_shape(slot.spec, tp.size);
        if (at.packed && at.shape != want)
          throw UserError("checkpoint " + file.path() + ": tensor " + slot.spec.name + " has shape " +
                          shape_string(at.shape) + " in its manifest's index, this model's is " + shape_string(want) +
                          ": it was saved from another model");
        if (opened.insert(at.dataset).second) {
          if (!file.has_dataset(at.dataset))
            throw UserError("checkpoint " + file.path() + " has no dataset " + at.dataset +
                            (at.packed ? ", which its manifest lists: the file is damaged; resume from another checkpoint"
                                       : ": it was saved from another model"));
          const Shape got = file.open_dataset(at.dataset);
          const Shape expected = at.packed ? index.packed_dataset_shape(at.dataset) : want;
          if (got != expected)
            throw UserError("checkpoint " + file.path() + ": dataset " + at.dataset + " has shape " + shape_string(got) +
                            (at.packed ? ", its manifest says " + shape_string(expected) +
                                             ": the file is damaged; resume from another checkpoint"
                                       : ", this model's is " + shape_string(want) + ": it was saved from another model"));
        }
        locations.push_back(std::move(at));
      }
  return locations;
}

// Reads unit elements [begin, end) of one kind into out (zero where no parameter lies), adding the
// checksum of the elements this rank is primary for (inside `owned`) to sums; `at` and `sums` are the
// unit's first slot's location and checksum pair (slot order).
void read_unit_range(ParallelHdf5File& file, const ParameterUnit& unit, TpLayout tp, int64_t begin, int64_t end,
                     float* out, OptimizerRange owned, bool primary, const TensorLocation* at, int64_t* sums) {
  std::fill(out, out + (end - begin), 0.0f);
  int slot_index = 0;
  for (const Piece& p : pieces_of(unit, begin, end)) {
    const TensorLocation& where = at[slot_index];
    int64_t* tensor_sums = sums + 2 * slot_index++;
    if (p.lo >= p.hi) continue;
    const std::vector<Hdf5Block> blocks = blocks_of(p, tp);
    const int64_t C = dataset_shape(p.slot->spec, tp.size).back();
    const std::span<float> data(out + (p.lo - begin), static_cast<size_t>(p.hi - p.lo));
    if (where.packed) {
      std::vector<Hdf5Slab> slabs;
      append_slabs(blocks, C, where.offset, slabs);
      file.read(where.dataset, slabs, data);
    } else {
      file.read(where.dataset, blocks, data);
    }
    if (!primary || !p.slot->spec.tp_counted_on(tp.rank)) continue;
    const Piece mine{p.slot, std::max(p.lo, owned.begin), std::min(p.hi, owned.end)};
    if (mine.lo >= mine.hi) continue;
    add_checksum(tensor_sums, blocks_of(mine, tp), C,
                 data.subspan(static_cast<size_t>(mine.lo - p.lo), static_cast<size_t>(mine.hi - mine.lo)));
  }
}

// Sums every rank's partial checksums and compares them with the manifest's, naming the first
// mismatch (the same verdict on every rank).
void verify(Communicator& world, std::vector<int64_t>& sums, const std::vector<std::string>& labels,
            const std::vector<TensorLocation>& locations, const std::string& file) {
  world.all_reduce(std::span<int64_t>(sums));
  for (size_t t = 0; t < locations.size(); ++t)
    if (checksum_text(&sums[2 * t]) != locations[t].checksum)
      throw UserError("checkpoint " + file + ": " + labels[t] +
                      " does not match its checksum in the manifest: the file was changed or corrupted after it "
                      "was written; resume from another checkpoint");
}

// Labels of `locations` (open_all's order) for verify.
std::vector<std::string> labels_of(ParameterStore& store, std::initializer_list<const char*> kinds,
                                   const std::vector<TensorLocation>& locations) {
  std::vector<std::string> labels;
  for (const char* kind : kinds)
    for (const ParameterUnit& unit : store.units())
      for (const ParameterSlot& slot : unit.slots) labels.push_back(tensor_label(kind, slot.spec.name, locations[labels.size()]));
  return labels;
}

// Index of unit u's first slot among all tensors of one kind.
std::vector<size_t> first_slot_of_units(ParameterStore& store) {
  std::vector<size_t> first;
  size_t n = 0;
  for (const ParameterUnit& unit : store.units()) {
    first.push_back(n);
    n += unit.slots.size();
  }
  return first;
}

}  // namespace

void read_parameters(ParallelHdf5File& file, ParallelModel& model, const StateIndex& index) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const std::vector<TensorLocation> at = open_all(file, index, store, tp, {kStateKinds[0]});
  const std::vector<OptimizerRange> owned = model.sharded_state().owned_ranges();
  const bool primary = model.sharded_state().primary_owner();
  const std::vector<size_t> first = first_slot_of_units(store);
  std::vector<int64_t> sums(2 * at.size(), 0);
  // The trained store: the whole model, or with LoRA the adapters (the frozen base comes from the model).
  model.sharded_state().load_parameters([&](int unit, int64_t begin, int64_t end, float* out) {
    const size_t f = first[static_cast<size_t>(unit)];
    read_unit_range(file, store.unit(unit), tp, begin, end, out, owned[static_cast<size_t>(unit)], primary, &at[f],
                    &sums[2 * f]);
  });
  verify(model.groups().world().host(), sums, labels_of(store, {kStateKinds[0]}, at), at, file.path());
}

void read_optimizer_state(ParallelHdf5File& file, ParallelModel& model, AdamW& optimizer, const StateIndex& index) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const std::initializer_list<const char*> kinds = {kStateKinds[1], kStateKinds[2]};
  const std::vector<TensorLocation> at = open_all(file, index, store, tp, kinds);
  const bool primary = model.sharded_state().primary_owner();
  const std::vector<size_t> first = first_slot_of_units(store);
  const size_t per_kind = at.size() / 2;
  std::vector<int64_t> sums(2 * at.size(), 0);
  for (size_t k = 0; k < 2; ++k) {
    std::vector<Tensor>& moments = k == 0 ? optimizer.exp_avg() : optimizer.exp_avg_sq();
    for (int u = 0; u < store.num_units(); ++u) {
      const OptimizerRange range = optimizer.ranges()[static_cast<size_t>(u)];
      const size_t f = k * per_kind + first[static_cast<size_t>(u)];
      std::vector<float> host(static_cast<size_t>(range.end - range.begin));
      read_unit_range(file, store.unit(u), tp, range.begin, range.end, host.data(), range, primary, &at[f], &sums[2 * f]);
      model.ops().copy_from_host(moments[static_cast<size_t>(u)], host.data(), host.size() * sizeof(float));
    }
  }
  verify(model.groups().world().host(), sums, labels_of(store, kinds, at), at, file.path());
}

}  // namespace trlhpc::checkpoint
