#include "trlhpc/model/model_weights.hpp"

#include <vector>

#include "trlhpc/model/init.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

UnitRangeSource weights_from_hf_dir(const HfModelDir& dir) {
  return [&dir](int unit, int64_t begin, int64_t end, float* out) {
    dir.read_flat_range(unit_parameter_specs(dir.config(), unit), begin, end, out);
  };
}

UnitRangeSource weights_from_init(const ModelConfig& config, uint64_t seed) {
  return [config, seed](int unit, int64_t begin, int64_t end, float* out) {
    init_flat_range(config, unit_parameter_specs(config, unit), seed, begin, end, out);
  };
}

void load_unit_range(const UnitRangeSource& source, Ops& ops, int unit, int64_t begin, int64_t end, const Tensor& dst) {
  std::vector<float> host(static_cast<size_t>(end - begin));
  source(unit, begin, end, host.data());
  ops.copy_from_host(dst, host.data(), host.size() * sizeof(float));
}

void load_all_units(const UnitRangeSource& source, Ops& ops, ParameterStore& store) {
  for (int u = 0; u < store.num_units(); ++u)
    load_unit_range(source, ops, u, 0, store.unit(u).padded_numel, store.unit(u).params);
}

}  // namespace trlhpc
