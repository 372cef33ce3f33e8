#include "trlhpc/train/model_export.hpp"

#include <span>
#include <unordered_map>
#include <vector>

#include "trlhpc/io/hf_model_dir.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

// Full tensors by name from this rank's tp slices: every tp rank all-gathers each of its local
// tensors (collective over the tp group, in store order); only the writer reassembles and keeps them.
// The writer therefore holds the whole model on the host once, as the single-file save needs anyway.
std::unordered_map<std::string, std::vector<float>> gather_tp_tensors(ParameterStore& store, Ops& ops, Communicator& tp,
                                                                      bool writer) {
  std::unordered_map<std::string, std::vector<float>> full;
  for (const ParameterUnit& unit : store.units())
    for (const ParameterSlot& slot : unit.slots) {
      std::vector<float> local(static_cast<size_t>(slot.numel));
      ops.copy_to_host(local.data(), store.param(slot.spec.name), local.size() * sizeof(float));
      std::vector<float> gathered(local.size() * static_cast<size_t>(tp.size()));
      tp.all_gather(local, std::span<float>(gathered));
      if (!writer) continue;
      std::vector<float>& out = full[slot.spec.name];
      out.resize(static_cast<size_t>(shape_numel(tp_full_shape(slot.spec, tp.size()))));
      tp_assemble_full(slot.spec, tp.size(), gathered, out);
    }
  return full;
}

}  // namespace

void export_hf_model(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                     bool writer) {
  ProcessGroups& groups = model.groups();
  model.strategy().gather_full_parameters();
  const auto full = gather_tp_tensors(model.store(), model.ops(), groups.tp().comm(), writer);
  model.strategy().release_full_parameters();
  if (writer) {
    HfSaveOptions options;
    options.tokenizer_source_dir = tokenizer_dir;
    save_hf_model_dir(output_dir, model.config(), [&](const ParameterSpec& spec, float* out) {
      const std::vector<float>& t = full.at(spec.name);
      std::copy(t.begin(), t.end(), out);
    }, options);
  }
  groups.world().comm().barrier();  // nobody reports success before the files exist
}

}  // namespace trlhpc
