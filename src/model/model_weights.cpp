#include "trlhpc/model/model_weights.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/init.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {

// Reads elements [begin, end) of the full (tp size 1) tensor `full` into out[0 .. end-begin).
using FullTensorReader = std::function<void(const ParameterSpec& full, int64_t begin, int64_t end, float* out)>;

// Elements [begin, end) of the concatenation of tp rank `tp`'s unit `specs` (in order, no gaps; past
// the total = padding = 0), each piece read from the full tensor's element runs this rank owns
// (tensor_parallel.hpp), so every layout sees the bits of a full single-process load.
void tp_flat_range(const std::vector<ParameterSpec>& specs, TpLayout tp, int64_t begin, int64_t end, float* out,
                   const FullTensorReader& read) {
  int64_t offset = 0;  // flat index where the current spec starts
  for (const ParameterSpec& spec : specs) {
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + spec.numel());
    if (lo < hi) {
      const ParameterSpec full = tp_full_spec(spec, tp.size);
      float* dst = out + (lo - begin);
      for_each_tp_global_range(spec, tp, lo - offset, hi - offset,
                               [&](int64_t gb, int64_t ge, int64_t local_offset) { read(full, gb, ge, dst + local_offset); });
    }
    offset += spec.numel();
  }
  if (end > offset) std::fill(out + (std::max(begin, offset) - begin), out + (end - begin), 0.0f);
}

}  // namespace

UnitRangeSource weights_from_hf_dir(const HfModelDir& dir, TpLayout tp) {
  return [&dir, tp](int unit, int64_t begin, int64_t end, float* out) {
    tp_flat_range(unit_parameter_specs(dir.config(), unit, tp), tp, begin, end, out,
                  [&dir](const ParameterSpec& full, int64_t b, int64_t e, float* o) { dir.read_tensor(full.name, b, e, o); });
  };
}

UnitRangeSource weights_from_init(const ModelConfig& config, uint64_t seed, TpLayout tp) {
  return [config, seed, tp](int unit, int64_t begin, int64_t end, float* out) {
    tp_flat_range(unit_parameter_specs(config, unit, tp), tp, begin, end, out,
                  [&](const ParameterSpec& full, int64_t b, int64_t e, float* o) {
                    init_parameter_range(config, full, seed, b, e, o);
                  });
  };
}

namespace {
// The specs of unit `unit`, in order.
std::vector<ParameterSpec> unit_specs(const std::vector<ParameterSpec>& local_specs, int unit) {
  std::vector<ParameterSpec> out;
  for (const ParameterSpec& spec : local_specs)
    if (spec.unit == unit) out.push_back(spec);
  return out;
}
}  // namespace

BaseTensorReader base_tensors_from_hf_dir(const HfModelDir& dir) {
  return [&dir](const std::string& name, int64_t b, int64_t e, float* o) { dir.read_tensor(name, b, e, o); };
}

BaseTensorReader base_tensors_from_init(const ModelConfig& config, uint64_t seed) {
  return [config, seed](const std::string& name, int64_t b, int64_t e, float* o) {
    for (const ParameterSpec& full : parameter_specs(config))
      if (full.name == name) return init_parameter_range(config, full, seed, b, e, o);
    TRLHPC_ASSERT(false, "base_tensors_from_init: the model has no " + name);
  };
}

UnitRangeSource lora_weights_from_init(const ModelConfig& config, const std::vector<ParameterSpec>& local_specs,
                                       uint64_t seed, BaseTensorReader base, TpLayout tp) {
  return [config, local_specs, seed, base = std::move(base), tp](int unit, int64_t begin, int64_t end, float* out) {
    tp_flat_range(unit_specs(local_specs, unit), tp, begin, end, out,
                  [&](const ParameterSpec& full, int64_t b, int64_t e, float* o) {
                    if (is_lora_factor(full.name)) lora_init_range(full, seed, b, e, o);
                    else base(lora_copy_base_name(config, full.name), b, e, o);  // a modules_to_save copy
                  });
  };
}

UnitRangeSource lora_weights_from_file(const SafetensorsReader& file, const std::vector<ParameterSpec>& local_specs,
                                       TpLayout tp) {
  return [&file, local_specs, tp](int unit, int64_t begin, int64_t end, float* out) {
    tp_flat_range(unit_specs(local_specs, unit), tp, begin, end, out,
                  [&file](const ParameterSpec& full, int64_t b, int64_t e, float* o) {
                    file.read_f32(peft_key(full.name), b, e, o);
                  });
  };
}

UnitRangeSource merged_weights_from_hf_dir(const HfModelDir& dir, const SafetensorsReader& adapter, const LoraConfig& lora,
                                           const LoraTargets& targets, TpLayout tp) {
  // The full A (r, in) and B (out, r) of every adapted weight, by the weight's name (small: r x (in + out)).
  struct Factors {
    std::vector<float> a, b;
  };
  auto factors = std::make_shared<std::unordered_map<std::string, Factors>>();
  const ModelConfig config = dir.config();
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (int m = 0; m < kLoraModuleCount; ++m) {
      if (!targets[static_cast<size_t>(l)][static_cast<size_t>(m)]) continue;
      const LoraModule module = kLoraModules[static_cast<size_t>(m)];
      (*factors)[layer_parameter_name(l, std::string(lora_module_path(module)) + ".weight")] =
          Factors{adapter.read_f32(peft_key(lora_parameter_name(l, module, 'A'))),
                  adapter.read_f32(peft_key(lora_parameter_name(l, module, 'B')))};
    }
  const double scale = lora.scale();
  const int64_t r = lora.r;
  const LoraSavedModules saved = resolve_lora_modules_to_save(config, lora);
  const ModelConfig merged = lora_merged_config(config, lora);
  return [&dir, &adapter, factors, scale, r, tp, config, merged, saved](int unit, int64_t begin, int64_t end, float* out) {
    tp_flat_range(unit_parameter_specs(merged, unit, tp), tp, begin, end, out,
                  [&](const ParameterSpec& full, int64_t b, int64_t e, float* o) {
                    if ((full.name == "model.embed_tokens.weight" && saved.embed_tokens) ||
                        (full.name == "model.norm.weight" && saved.norm) ||
                        (full.name == "lm_head.weight" && saved.lm_head))
                      return adapter.read_f32(peft_key(full.name), b, e, o);  // the trained copy
                    dir.read_tensor(lora_copy_base_name(config, full.name), b, e, o);
                    const auto it = factors->find(full.name);
                    if (it == factors->end()) return;
                    // W + scale B A, element by element (PEFT's merge: delta = B @ A * scaling, added to W).
                    const int64_t in = full.shape.at(1);
                    const float* A = it->second.a.data();
                    const float* B = it->second.b.data();
                    for (int64_t i = b; i < e; ++i) {
                      const int64_t row = i / in, col = i % in;
                      double dot = 0;  // in double: the merge adds one rounding, at the end
                      for (int64_t k = 0; k < r; ++k)
                        dot += static_cast<double>(B[row * r + k]) * static_cast<double>(A[k * in + col]);
                      o[i - b] += static_cast<float>(dot * scale);
                    }
                  });
  };
}

void load_unit_range(const UnitRangeSource& source, Ops& ops, int unit, int64_t begin, int64_t end, const Tensor& dst,
                     int64_t piece_elements) {
  // Piece by piece, so loading holds one piece on the host, not a copy of the range (the embedding
  // alone is 0.5 GiB at Qwen2.5-0.5B). Every source is element-wise, so the pieces give the same bits.
  const int64_t piece = std::max<int64_t>(1, std::min(end - begin, piece_elements));
  std::vector<float> host(static_cast<size_t>(piece));
  for (int64_t b = begin; b < end; b += piece) {
    const int64_t e = std::min(end, b + piece);
    source(unit, b, e, host.data());
    ops.copy_from_host(dst.view({e - b}, b - begin), host.data(), static_cast<size_t>(e - b) * sizeof(float));
  }
}

void load_all_units(const UnitRangeSource& source, Ops& ops, ParameterStore& store) {
  for (int u = 0; u < store.num_units(); ++u)
    load_unit_range(source, ops, u, 0, store.unit(u).padded_numel, store.unit(u).params);
}

}  // namespace trlhpc
