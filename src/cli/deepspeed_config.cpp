#include "trlhpc/cli/deepspeed_config.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/cli/json_argument.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

// An offload block's device: "cpu" or "none" (nvme is refused by the accelerate reader).
std::string offload_device(const json& zero, const char* key, const std::string& origin) {
  if (!zero.contains(key)) return "none";
  const json& block = zero[key];
  if (!block.is_object() || !block.contains("device") || !block["device"].is_string())
    throw UserError(origin + ": zero_optimization." + key + " must be an object with a \"device\" (cpu or none)");
  return block["device"].get<std::string>();
}

// "enabled": true | false | "auto" of a bf16 / fp16 block; nullopt for auto or no block.
std::optional<bool> enabled(const json& config, const char* block, const std::string& origin) {
  if (!config.contains(block)) return std::nullopt;
  const json& b = config[block];
  const json value = b.is_object() && b.contains("enabled") ? b["enabled"] : json("auto");
  if (value.is_boolean()) return value.get<bool>();
  if (value == "auto") return std::nullopt;
  throw UserError(origin + ": " + block + ".enabled must be true, false or \"auto\", got " + value.dump());
}

// A number or "auto" for a trlhpc option: fills it unless given; a given different value is a contradiction.
template <class T>
void fill(const json& config, const char* key, const char* flag, T& target, const std::set<std::string>& explicit_flags,
          const std::string& origin) {
  if (!config.contains(key) || config[key] == "auto") return;
  if (!config[key].is_number())
    throw UserError(origin + ": " + key + " must be a number or \"auto\", got " + config[key].dump());
  const T value = config[key].get<T>();
  if (explicit_flags.count(flag) && value != target) {
    std::ostringstream os;
    os << origin << ": " << key << " " << config[key].dump() << " contradicts --" << flag << " " << target
       << ": make them equal, or set " << key << " to \"auto\"";
    throw UserError(os.str());
  }
  target = value;
}

}  // namespace

void apply_deepspeed_config(const std::set<std::string>& explicit_flags, int world_size, SftConfig& c,
                            std::vector<std::string>& notes) {
  std::string origin;
  const json ds = read_json_argument("deepspeed", c.deepspeed, "a DeepSpeed config", origin);
  if (!c.accelerate_config.empty())
    throw UserError(origin + " and --accelerate_config " + c.accelerate_config +
                    " both choose the distributed strategy: give one of them");
  int64_t stage = 0;
  std::string offload_optimizer = "none", offload_param = "none";
  if (ds.contains("zero_optimization")) {
    const json& zero = ds["zero_optimization"];
    if (!zero.is_object()) throw UserError(origin + ": zero_optimization must be an object");
    if (zero.contains("stage")) {
      if (!zero["stage"].is_number_integer()) throw UserError(origin + ": zero_optimization.stage must be 0, 1, 2 or 3");
      stage = zero["stage"].get<int64_t>();
    }
    offload_optimizer = offload_device(zero, "offload_optimizer", origin);
    offload_param = offload_device(zero, "offload_param", origin);
  }
  if (enabled(ds, "fp16", origin).value_or(false)) throw UserError(origin + ": fp16.enabled true is not supported: use bf16 (--bf16)");
  const std::optional<bool> bf16 = enabled(ds, "bf16", origin);
  // The accelerate reader owns the ZeRO and offload rules and their messages.
  std::ostringstream yaml;
  yaml << "distributed_type: DEEPSPEED\nmixed_precision: " << (bf16.value_or(false) ? "bf16" : "no")
       << "\ndeepspeed_config:\n  zero_stage: " << stage << "\n  offload_optimizer_device: " << offload_optimizer
       << "\n  offload_param_device: " << offload_param << "\n";
  AccelerateConfig accelerate = parse_accelerate_config(yaml.str(), origin + " (as accelerate's deepspeed_config)",
                                                        /*named_profile=*/false, world_size);
  accelerate.path = origin;
  std::set<std::string> flags = explicit_flags;
  if (!bf16) flags.insert("bf16");  // "auto" or no block: --bf16 keeps its value
  apply_accelerate_config(accelerate, flags, c);
  fill(ds, "gradient_accumulation_steps", "gradient_accumulation_steps", c.gradient_accumulation_steps, explicit_flags, origin);
  fill(ds, "train_micro_batch_size_per_gpu", "per_device_train_batch_size", c.per_device_train_batch_size, explicit_flags, origin);
  fill(ds, "gradient_clipping", "max_grad_norm", c.max_grad_norm, explicit_flags, origin);
  static const std::set<std::string> kRead = {"zero_optimization", "bf16", "fp16", "gradient_accumulation_steps",
                                              "train_micro_batch_size_per_gpu", "gradient_clipping", "train_batch_size"};
  for (const auto& [key, value] : ds.items())
    if (!kRead.count(key)) notes.push_back(origin + ": " + key + " ignored (trlhpc runs its own AdamW, schedule and logging)");
  notes.push_back(origin + ": ZeRO stage " + std::to_string(stage) + " -> --sharding " + c.sharding +
                  (c.offload == "none" ? "" : ", offload " + c.offload));
}

}  // namespace trlhpc
