#include "trlhpc/train/model_export.hpp"

#include <exception>
#include <optional>
#include <span>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/peft_adapter.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

// The full tensor of one slot of a gathered unit, from this rank's tp slice: every tp rank all-gathers
// it (collective over the tp group); the writer reassembles it into `full`. At most one slot's full
// tensor exists at a time on the host.
void gather_tp_tensor(const ParameterSlot& slot, ParameterStore& store, Ops& ops, Communicator& tp, bool writer,
                      std::vector<float>& full) {
  std::vector<float> local(static_cast<size_t>(slot.numel));
  ops.copy_to_host(local.data(), store.param(slot.spec.name), local.size() * sizeof(float));
  std::vector<float> gathered(local.size() * static_cast<size_t>(tp.size()));
  tp.all_gather(local, std::span<float>(gathered));
  local = {};
  if (!writer) return;
  full.resize(static_cast<size_t>(shape_numel(tp_full_shape(slot.spec, tp.size()))));
  tp_assemble_full(slot.spec, tp.size(), gathered, full);
}

}  // namespace

void export_peft_adapter(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                         bool writer, const std::string& base_model_name) {
  TRLHPC_ASSERT(model.has_adapters(), "export_peft_adapter: the model has no adapters");
  ProcessGroups& groups = model.groups();
  DataParallelStrategy& strategy = model.strategy();
  ParameterStore& store = model.store();
  strategy.release_cached_buffers();
  // The adapters are small (r x (in + out) per module): gathered whole onto the writer, then written.
  std::vector<std::vector<float>> tensors;
  std::vector<float> full;
  for (int u = 0; u < store.num_units(); ++u) {
    strategy.state().gather_unit_parameters(u);
    for (const ParameterSlot& slot : store.unit(u).slots) {
      gather_tp_tensor(slot, store, model.ops(), groups.tp().host(), writer, full);
      if (writer) tensors.push_back(full);
    }
    strategy.state().release_unit_parameters(u);
  }
  int failed = 0;
  std::string error;
  if (writer) {
    try {
      size_t next = 0;
      save_peft_adapter(output_dir, model.config(), model.lora(), model.lora_targets(), base_model_name,
                        [&](const ParameterSpec& spec, float* out) {
                          const std::vector<float>& t = tensors.at(next++);
                          TRLHPC_ASSERT(static_cast<int64_t>(t.size()) == spec.numel(), "adapter order mismatch at " + spec.name);
                          std::copy(t.begin(), t.end(), out);
                        });
      copy_hf_tokenizer_files(tokenizer_dir, output_dir);
    } catch (const std::exception& e) {
      failed = 1;
      error = e.what();
    }
  }
  groups.world().host().all_reduce(std::span<int>(&failed, 1), ReduceOp::Max);
  if (failed)
    throw RuntimeFailure(rank_prefix() + "saving the LoRA adapter to " + output_dir + " failed" +
                         (error.empty() ? " on the writing rank: see its message" : ": " + error));
}

void export_hf_model(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                     bool writer, DType dtype) {
  ProcessGroups& groups = model.groups();
  DataParallelStrategy& strategy = model.strategy();
  ParameterStore& store = model.store();
  // The step's cached unit buffers are idle from here on; the save gathers one unit at a time.
  strategy.release_cached_buffers();
  // A failure of the writer (disk full, permissions) must not leave the other ranks waiting in the
  // next unit's all-gather: the writer stops writing but keeps gathering, and the outcome is agreed below.
  std::exception_ptr failure;
  std::optional<HfModelWriter> out;
  const auto attempt = [&](auto&& write) {
    if (!writer || failure) return;
    try {
      write();
    } catch (...) {
      failure = std::current_exception();
      out.reset();
    }
  };
  attempt([&] {
    HfSaveOptions options;
    options.tokenizer_source_dir = tokenizer_dir;
    options.dtype = dtype;
    out.emplace(output_dir, model.config(), options);
  });
  std::vector<float> full;  // (numel of the largest full tensor) one parameter at a time
  for (int u = 0; u < store.num_units(); ++u) {
    strategy.state().gather_unit_parameters(u);
    for (const ParameterSlot& slot : store.unit(u).slots) {
      gather_tp_tensor(slot, store, model.ops(), groups.tp().host(), writer, full);
      attempt([&] { out->append(slot.spec.name, full.data(), static_cast<int64_t>(full.size())); });
    }
    strategy.state().release_unit_parameters(u);
  }
  attempt([&] { out->finish(); });
  int failed = failure ? 1 : 0;
  groups.world().host().all_reduce(std::span<int>(&failed, 1), ReduceOp::Max);  // nobody reports success before the files exist
  if (failure) std::rethrow_exception(failure);
  if (failed)
    throw RuntimeFailure(rank_prefix() + "the final save of the model to " + output_dir +
                         " failed on the writing rank: see its message");
}

}  // namespace trlhpc
