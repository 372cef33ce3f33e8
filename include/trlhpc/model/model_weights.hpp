#pragma once
// Filling a ParameterStore's unit buffers from a Hugging Face directory or the deterministic init, and
// reading full parameters back out for saving. Works on element ranges of unit buffers so a rank
// touches only what it owns (the whole unit without sharding, its shard under ZeRO-3/FSDP).
#include <cstdint>
#include <functional>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/parameter_store.hpp"

namespace trlhpc {

class Ops;

// Writes elements [begin, end) of unit `unit`'s flat buffer into host memory `out`.
using UnitRangeSource = std::function<void(int unit, int64_t begin, int64_t end, float* out)>;

// Sources for the unit buffers of tp rank `tp` (default: no tensor parallel). Each reads only the
// element runs of the full tensors that rank owns (tensor_parallel.hpp), so every tp layout starts
// from the bits of a full load / full init.
UnitRangeSource weights_from_hf_dir(const HfModelDir& dir, TpLayout tp = {});
UnitRangeSource weights_from_init(const ModelConfig& config, uint64_t seed, TpLayout tp = {});
// Reads elements [begin, end) of the base model's full tensor `name` into out.
using BaseTensorReader = std::function<void(const std::string& name, int64_t begin, int64_t end, float* out)>;
// The base tensors of a model directory, or of the seeded init of `config` (--model_config runs).
BaseTensorReader base_tensors_from_hf_dir(const HfModelDir& dir);
BaseTensorReader base_tensors_from_init(const ModelConfig& config, uint64_t seed);
// The same for a LoRA adapter store (lora.hpp, units by lora_unit_layout): PEFT's initialisation
// (lora_init_range) with modules_to_save copies read from `base` (lora_copy_base_name), or the tensors
// of a PEFT adapter_model.safetensors (keys peft_key(name), shapes checked by the caller).
// `local_specs`: lora_parameter_specs(..., tp), the store's own.
UnitRangeSource lora_weights_from_init(const ModelConfig& config, const std::vector<ParameterSpec>& local_specs,
                                       uint64_t seed, BaseTensorReader base, TpLayout tp = {});
UnitRangeSource lora_weights_from_file(const SafetensorsReader& file, const std::vector<ParameterSpec>& local_specs,
                                       TpLayout tp = {});

// The base model of `dir` with a LoRA adapter merged into its weights, W + scale B A (PEFT's
// merge_and_unload), modules_to_save replaced by the adapter's copies, for tp rank `tp`: generation and
// `export --merge` of an adapter. The model to fill is lora_merged_config(dir.config(), lora) (a tied
// base whose head or embedding was trained comes out untied). `targets` and the adapter's tensors must
// have been checked (PeftAdapterDir::check_weights); both readers must outlive it.
UnitRangeSource merged_weights_from_hf_dir(const HfModelDir& dir, const SafetensorsReader& adapter, const LoraConfig& lora,
                                           const LoraTargets& targets, TpLayout tp = {});
// Fills `dst` (a device tensor of end-begin elements) with elements [begin, end) of unit `unit`, asking
// `source` for at most `piece_elements` at a time (the host memory the load needs).
inline constexpr int64_t kLoadPieceElements = int64_t{1} << 22;  // 16 MiB of fp32
void load_unit_range(const UnitRangeSource& source, Ops& ops, int unit, int64_t begin, int64_t end, const Tensor& dst,
                     int64_t piece_elements = kLoadPieceElements);
// Fills every unit of the store completely (no sharding).
void load_all_units(const UnitRangeSource& source, Ops& ops, ParameterStore& store);

}  // namespace trlhpc
