#include "trlhpc/train/checkpoint/state.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <span>

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/train/checkpoint/layout.hpp"

namespace trlhpc::checkpoint {
namespace {

constexpr const char* kParams = "params";
constexpr const char* kExpAvg = "exp_avg";
constexpr const char* kExpAvgSq = "exp_avg_sq";

std::string dataset_name(const char* kind, const ParameterSpec& spec) { return std::string(kind) + "/" + spec.name; }

uint64_t element_hash(int64_t index, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  uint64_t z = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(bits) << 17 | bits);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Adds the elements of `blocks` (values in `data`, block order) of a dataset with C columns.
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

// One parameter's part of a unit range: unit elements [lo, hi) = the slot's local [lo - offset, hi - offset).
struct Piece {
  const ParameterSlot* slot;
  int64_t lo, hi;
};

std::vector<Piece> pieces_of(const ParameterUnit& unit, int64_t begin, int64_t end) {
  std::vector<Piece> pieces;
  for (const ParameterSlot& slot : unit.slots)
    pieces.push_back({&slot, std::clamp(slot.offset, begin, end), std::clamp(slot.offset + slot.numel, begin, end)});
  return pieces;
}

// Blocks of a piece, or none when the piece is empty.
std::vector<Hdf5Block> blocks_of(const Piece& p, TpLayout tp) {
  if (p.lo >= p.hi) return {};
  return global_blocks(p.slot->spec, tp, p.lo - p.slot->offset, p.hi - p.slot->offset);
}

// Every dataset of the model, in the order every rank visits them.
std::vector<std::pair<const char*, const ParameterSpec*>> datasets_of(ParameterStore& store, std::initializer_list<const char*> kinds) {
  std::vector<std::pair<const char*, const ParameterSpec*>> out;
  for (const char* kind : kinds)
    for (const ParameterUnit& unit : store.units())
      for (const ParameterSlot& slot : unit.slots) out.emplace_back(kind, &slot.spec);
  return out;
}

// Sums every rank's partial checksums and compares them with the manifest's, naming the first
// mismatch (the same verdict on every rank).
void verify(Communicator& world, std::vector<int64_t>& sums, const std::vector<std::string>& names,
            const nlohmann::json& datasets, const std::string& file) {
  world.all_reduce(std::span<int64_t>(sums));
  for (size_t d = 0; d < names.size(); ++d) {
    const std::string want = datasets.contains(names[d]) ? datasets[names[d]].value("checksum", "") : "";
    if (checksum_text(&sums[2 * d]) != want)
      throw UserError("checkpoint " + file + ": dataset " + names[d] +
                      " does not match its checksum in the manifest: the file was changed or corrupted after it "
                      "was written; resume from another checkpoint");
  }
}

constexpr std::array<const char*, 3> kStateKinds = {kParams, kExpAvg, kExpAvgSq};

}  // namespace

StateLayout state_layout(ParallelModel& model, AdamW& optimizer) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const bool primary = model.sharded_state().primary_owner();
  StateLayout layout;
  layout.num_sources = static_cast<int>(kStateKinds.size()) * store.num_units();
  int source = 0;
  for (const char* kind : kStateKinds) {
    for (int u = 0; u < store.num_units(); ++u, ++source) {
      const OptimizerRange range = optimizer.ranges()[static_cast<size_t>(u)];
      for (const Piece& p : pieces_of(store.unit(u), range.begin, range.end)) {
        StatePart part{dataset_name(kind, p.slot->spec), dataset_shape(p.slot->spec, tp.size), source, {}, 0, 0};
        if (primary && p.slot->spec.tp_counted_on(tp.rank)) {  // only the primary copy is written
          part.blocks = blocks_of(p, tp);
          part.offset = p.lo - range.begin;
          part.count = p.hi - p.lo;
        }
        layout.parts.push_back(std::move(part));
      }
    }
  }
  return layout;
}

HostValues copy_source(ParallelModel& model, AdamW& optimizer, const StateLayout& layout, int source) {
  const bool writes = std::any_of(layout.parts.begin(), layout.parts.end(),
                                  [&](const StatePart& p) { return p.source == source && p.count > 0; });
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

nlohmann::json write_state(ParallelHdf5File& file, Communicator& comm, const StateLayout& layout,
                           const StateSource& source) {
  for (const StatePart& part : layout.parts) file.create_dataset(part.dataset, part.shape);
  file.agree_pending("creating the state datasets");
  std::vector<int64_t> sums(2 * layout.parts.size(), 0);
  for (size_t d = 0; d < layout.parts.size(); ++d) {
    const StatePart& part = layout.parts[d];
    const std::span<const float> data =
        part.count > 0 ? source(part.source).subspan(static_cast<size_t>(part.offset), static_cast<size_t>(part.count))
                       : std::span<const float>();
    file.write(part.dataset, part.blocks, data);
    add_checksum(&sums[2 * d], part.blocks, part.shape.back(), data);
  }
  file.agree_pending("writing the state datasets");
  comm.all_reduce(std::span<int64_t>(sums));
  nlohmann::json datasets = nlohmann::json::object();
  for (size_t d = 0; d < layout.parts.size(); ++d)
    datasets[layout.parts[d].dataset] = {{"shape", layout.parts[d].shape}, {"checksum", checksum_text(&sums[2 * d])}};
  return datasets;
}

namespace {

// Opens every dataset of `kinds` (collective, in order) and checks its shape against this model's.
std::vector<std::string> open_all(ParallelHdf5File& file, ParameterStore& store, TpLayout tp,
                                  std::initializer_list<const char*> kinds) {
  std::vector<std::string> names;
  for (const auto& [kind, spec] : datasets_of(store, kinds)) {
    const std::string name = dataset_name(kind, *spec);
    const Shape want = dataset_shape(*spec, tp.size);
    if (!file.has_dataset(name))
      throw UserError("checkpoint " + file.path() + " has no dataset " + name + ": it was saved from another model");
    const Shape got = file.open_dataset(name);
    if (got != want)
      throw UserError("checkpoint " + file.path() + ": dataset " + name + " has shape " + shape_string(got) +
                      ", this model's is " + shape_string(want) + ": it was saved from another model");
    names.push_back(name);
  }
  return names;
}

// Reads unit elements [begin, end) of `kind` into out (zero where no parameter lies), adding the
// checksum of the elements this rank is primary for (inside `owned`) to sums (indexed by slot order).
void read_unit_range(ParallelHdf5File& file, const char* kind, const ParameterUnit& unit, TpLayout tp, int64_t begin,
                     int64_t end, float* out, OptimizerRange owned, bool primary, int64_t* unit_sums) {
  std::fill(out, out + (end - begin), 0.0f);
  int slot_index = 0;
  for (const Piece& p : pieces_of(unit, begin, end)) {
    int64_t* sums = unit_sums + 2 * slot_index++;
    if (p.lo >= p.hi) continue;
    const std::string name = dataset_name(kind, p.slot->spec);
    const std::span<float> data(out + (p.lo - begin), static_cast<size_t>(p.hi - p.lo));
    file.read(name, blocks_of(p, tp), data);
    if (!primary || !p.slot->spec.tp_counted_on(tp.rank)) continue;
    const Piece mine{p.slot, std::max(p.lo, owned.begin), std::min(p.hi, owned.end)};
    if (mine.lo >= mine.hi) continue;
    add_checksum(sums, blocks_of(mine, tp), dataset_shape(p.slot->spec, tp.size).back(),
                 data.subspan(static_cast<size_t>(mine.lo - p.lo), static_cast<size_t>(mine.hi - mine.lo)));
  }
}

// Index of unit u's first slot among all datasets of one kind.
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

void read_parameters(ParallelHdf5File& file, ParallelModel& model, const nlohmann::json& datasets) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const std::vector<std::string> names = open_all(file, store, tp, {kParams});
  const std::vector<OptimizerRange> owned = model.sharded_state().owned_ranges();
  const bool primary = model.sharded_state().primary_owner();
  const std::vector<size_t> first = first_slot_of_units(store);
  std::vector<int64_t> sums(2 * names.size(), 0);
  model.load_weights([&](int unit, int64_t begin, int64_t end, float* out) {
    read_unit_range(file, kParams, store.unit(unit), tp, begin, end, out, owned[static_cast<size_t>(unit)], primary,
                    &sums[2 * first[static_cast<size_t>(unit)]]);
  });
  verify(model.groups().world().host(), sums, names, datasets, file.path());
}

void read_optimizer_state(ParallelHdf5File& file, ParallelModel& model, AdamW& optimizer, const nlohmann::json& datasets) {
  ParameterStore& store = model.store();
  const TpLayout tp = model.tp_layout();
  const std::vector<std::string> names = open_all(file, store, tp, {kExpAvg, kExpAvgSq});
  const bool primary = model.sharded_state().primary_owner();
  const std::vector<size_t> first = first_slot_of_units(store);
  const size_t per_kind = names.size() / 2;
  std::vector<int64_t> sums(2 * names.size(), 0);
  for (int k = 0; k < 2; ++k) {
    const char* kind = k == 0 ? kExpAvg : kExpAvgSq;
    std::vector<Tensor>& moments = k == 0 ? optimizer.exp_avg() : optimizer.exp_avg_sq();
    for (int u = 0; u < store.num_units(); ++u) {
      const OptimizerRange range = optimizer.ranges()[static_cast<size_t>(u)];
      std::vector<float> host(static_cast<size_t>(range.end - range.begin));
      read_unit_range(file, kind, store.unit(u), tp, range.begin, range.end, host.data(), range, primary,
                      &sums[2 * (k * per_kind + first[static_cast<size_t>(u)])]);
      model.ops().copy_from_host(moments[static_cast<size_t>(u)], host.data(), host.size() * sizeof(float));
    }
  }
  verify(model.groups().world().host(), sums, names, datasets, file.path());
}

}  // namespace trlhpc::checkpoint
