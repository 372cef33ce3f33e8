#include "trlhpc/cli/accelerate_config.hpp"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

namespace fs = std::filesystem;

// Keys of accelerate's schema that mean nothing to an MPI job on the cpu backend (launcher addresses,
// machine ranks, TPU and dynamo settings, PyTorch module-wrapping details).
const std::set<std::string> kIgnoredTop = {
    "compute_environment", "debug", "downcast_bf16", "dynamo_config", "enable_cpu_affinity", "gpu_ids",
    "ipex_config", "machine_rank", "main_process_ip", "main_process_port", "main_training_function",
    "megatron_lm_config", "mpirun_config", "num_machines", "rdzv_backend", "same_network", "tpu_env",
    "tpu_name", "tpu_use_cluster", "tpu_use_sudo", "tpu_zone", "use_cpu", "commands", "command_file"};
const std::set<std::string> kIgnoredDeepSpeed = {
    "deepspeed_multinode_launcher", "deepspeed_hostfile", "deepspeed_exclusion_filter", "deepspeed_inclusion_filter",
    "gradient_accumulation_steps", "gradient_clipping", "zero3_init_flag", "zero3_save_16bit_model",
    "offload_optimizer_nvme_path", "offload_param_nvme_path"};
const std::set<std::string> kIgnoredFsdp = {
    "fsdp_auto_wrap_policy", "fsdp_backward_prefetch", "fsdp_backward_prefetch_policy", "fsdp_cpu_ram_efficient_loading",
    "fsdp_forward_prefetch", "fsdp_min_num_params", "fsdp_state_dict_type", "fsdp_sync_module_states",
    "fsdp_transformer_layer_cls_to_wrap", "fsdp_use_orig_params"};
const std::set<std::string> kIgnoredParallelism = {
    "parallelism_config_sp_backend", "parallelism_config_sp_seq_length_is_variable",
    "parallelism_config_sp_attn_implementation", "parallelism_config_cp_backend", "parallelism_config_cp_comm_strategy"};

// One FSDP sharding strategy (torch.distributed.fsdp.ShardingStrategy; accelerate also takes 1..5).
struct FsdpStrategy {
  std::string name, sharding;
  bool hybrid = false;
};
const std::vector<FsdpStrategy> kFsdpStrategies = {{"FULL_SHARD", "zero3"},
                                                   {"SHARD_GRAD_OP", "zero2"},
                                                   {"NO_SHARD", "none"},
                                                   {"HYBRID_SHARD", "zero3", true},
                                                   {"HYBRID_SHARD_ZERO2", "zero2", true}};

// Typed access to one YAML document; every error names the document and the key.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& what) const { throw UserError("accelerate config " + origin_ + ": " + what); }

  // A mapping key: YAML allows any node as a key ({[a]: 1}); accelerate's settings are named by scalars.
  std::string key(const YAML::Node& node) const {
    if (!node.IsScalar())
      fail("a key must be a plain name, not a list or mapping (line " + std::to_string(node.Mark().line + 1) + ")");
    return node.as<std::string>();
  }
  std::string text(const YAML::Node& node, const std::string& key) const {

    if (!node.IsScalar()) fail("'" + key + "' must be a single value (line " + std::to_string(node.Mark().line + 1) + ")");
    return node.as<std::string>();
  }
  int64_t integer(const YAML::Node& node, const std::string& key) const {
    try {
      if (node.IsScalar()) return node.as<int64_t>();
    } catch (const YAML::Exception&) {
    }
    fail("'" + key + "' must be an integer, got '" + (node.IsScalar() ? node.as<std::string>() : "a non-scalar") + "'");
  }
  bool boolean(const YAML::Node& node, const std::string& key) const {
    try {
      if (node.IsScalar()) return node.as<bool>();
    } catch (const YAML::Exception&) {
    }
    fail("'" + key + "' must be true or false, got '" + (node.IsScalar() ? node.as<std::string>() : "a non-scalar") + "'");
  }
  // A warning, not an error: accelerate adds keys between releases, and a file written by a newer one
  // should still run. The line lets the user find a misspelt key.
  void unknown(const std::string& key, const YAML::Node& node, AccelerateConfig& out) const {
    out.warnings.push_back("accelerate config " + origin_ + ": line " + std::to_string(node.Mark().line + 1) +
                           ": unknown key '" + key + "' ignored");
  }
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

// A strategy from fsdp_reshard_after_forward (bool or name) or fsdp_sharding_strategy (name or 1..5).
FsdpStrategy fsdp_strategy(const Reader& r, const YAML::Node& node, const std::string& key) {
  const std::string value = r.text(node, key);
  std::string upper = value;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  if (upper == "TRUE") return kFsdpStrategies[0];
  if (upper == "FALSE") return kFsdpStrategies[1];
  for (size_t i = 0; i < kFsdpStrategies.size(); ++i)
    if (upper == kFsdpStrategies[i].name || value == std::to_string(i + 1)) return kFsdpStrategies[i];
  r.fail("fsdp_config." + key + " '" + value +
         "' is not a sharding strategy: use true, false, FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or "
         "HYBRID_SHARD_ZERO2");
}

// deepspeed_config.offload_*_device: none | cpu (nvme is DeepSpeed's ZeRO-Infinity, not built here).
bool offload_device(const Reader& r, const YAML::Node& node, const std::string& key) {
  const std::string device = r.text(node, "deepspeed_config." + key);
  if (device == "none") return false;
  if (device == "cpu") return true;
  r.fail("deepspeed_config." + key + " " + device + " is not supported: use cpu (pinned host memory) or none" +
         (device == "nvme" ? " (NVMe offload, ZeRO-Infinity, is not built)" : ""));
}

void read_deepspeed(const Reader& r, const YAML::Node& ds, bool active, AccelerateConfig& out) {
  std::optional<int64_t> stage;
  bool offload_optimizer = false, offload_param = false;
  for (const auto& kv : ds) {
    const std::string key = r.key(kv.first);
    if (key == "zero_stage") {
      stage = r.integer(kv.second, "deepspeed_config.zero_stage");
    } else if (key == "deepspeed_config_file") {
      r.fail("deepspeed_config.deepspeed_config_file is not read by trlhpc: put zero_stage (0..3) in the accelerate file");
    } else if (key == "offload_optimizer_device") {
      offload_optimizer = offload_device(r, kv.second, key);
    } else if (key == "offload_param_device") {
      offload_param = offload_device(r, kv.second, key);
    } else if (key == "seq_parallel_communication_data_type") {
      std::string dtype = r.text(kv.second, "deepspeed_config." + key);
      if (dtype == "bfloat16" || dtype == "torch.bfloat16") dtype = "bf16";
      if (dtype == "float32" || dtype == "torch.float32") dtype = "fp32";
      if (dtype != "bf16" && dtype != "fp32")
        r.fail("deepspeed_config.seq_parallel_communication_data_type '" + dtype + "' is not bf16 or fp32");
      out.sp_communication_dtype = dtype;
    } else if (!kIgnoredDeepSpeed.count(key)) {
      r.unknown("deepspeed_config." + key, kv.first, out);
    }
  }
  if (!active) {
    if (stage) r.fail("deepspeed_config.zero_stage " + std::to_string(*stage) + " contradicts distributed_type " +
                      out.distributed_type + ": set distributed_type: DEEPSPEED or remove deepspeed_config");
    return;
  }
  if (!stage)
    r.fail("distributed_type DEEPSPEED without deepspeed_config.zero_stage: set zero_stage to 0, 1, 2 or 3");
  if (*stage < 0 || *stage > 3)
    r.fail("deepspeed_config.zero_stage " + std::to_string(*stage) + " does not exist: ZeRO has stages 0, 1, 2 and 3");
  const char* kinds[] = {"none", "zero1", "zero2", "zero3"};
  out.sharding = kinds[*stage];
  // DeepSpeed's own rules: offload needs ZeRO (stage >= 1), parameter offload stage 3. trlhpc adds one:
  // its fp32 parameter shard is the optimizer's master, so it goes to the host only with the optimizer.
  if (offload_optimizer && *stage == 0)
    r.fail("deepspeed_config.offload_optimizer_device cpu needs zero_stage 1, 2 or 3 (zero_stage is 0): raise "
           "zero_stage or set offload_optimizer_device: none");
  if (offload_param && *stage != 3)
    r.fail("deepspeed_config.offload_param_device cpu needs zero_stage 3 (zero_stage is " + std::to_string(*stage) +
           "; below stage 3 every rank keeps the full parameters on its device): set zero_stage: 3 or "
           "offload_param_device: none");
  if (offload_param && !offload_optimizer)
    r.fail("deepspeed_config.offload_param_device cpu without offload_optimizer_device cpu is not supported (trlhpc's "
           "fp32 parameter shard is the optimizer's master copy): set offload_optimizer_device: cpu as well");
  if (offload_param) out.offload = "parameters", out.offload_key = "deepspeed_config.offload_param_device cpu";
  else if (offload_optimizer) out.offload = "optimizer", out.offload_key = "deepspeed_config.offload_optimizer_device cpu";
}

void read_fsdp(const Reader& r, const YAML::Node& fsdp, bool active, AccelerateConfig& out, bool& hybrid) {
  std::optional<FsdpStrategy> reshard, strategy;
  bool settings = false;  // keys that only make sense under FSDP
  bool offload_params = false;
  for (const auto& kv : fsdp) {
    const std::string key = r.key(kv.first);
    if (key == "fsdp_version") {
      const int64_t version = r.integer(kv.second, "fsdp_config.fsdp_version");
      if (version != 1 && version != 2)
        r.fail("fsdp_config.fsdp_version " + std::to_string(version) + " does not exist: use 1 or 2");
      settings = true;
    } else if (key == "fsdp_reshard_after_forward") {
      reshard = fsdp_strategy(r, kv.second, key);
      settings = true;
    } else if (key == "fsdp_sharding_strategy") {
      strategy = fsdp_strategy(r, kv.second, key);
      settings = true;
    } else if (key == "fsdp_activation_checkpointing") {
      out.activation_checkpointing = r.boolean(kv.second, "fsdp_config." + key);
    } else if (key == "fsdp_offload_params") {
      offload_params = r.boolean(kv.second, "fsdp_config." + key);
    } else if (!kIgnoredFsdp.count(key)) {
      r.unknown("fsdp_config." + key, kv.first, out);
    }
  }
  if (!active) {
    if (settings) r.fail("fsdp_config sets a sharding strategy or version but distributed_type is " + out.distributed_type +
                         ": set distributed_type: FSDP or remove fsdp_config");
    out.activation_checkpointing.reset();
    return;
  }
  if (reshard && strategy && reshard->name != strategy->name)
    r.fail("fsdp_config.fsdp_reshard_after_forward (" + reshard->name + ") and fsdp_config.fsdp_sharding_strategy (" +
           strategy->name + ") disagree: keep one of them");
  const FsdpStrategy chosen = reshard ? *reshard : strategy ? *strategy : kFsdpStrategies[0];
  out.sharding = chosen.sharding;
  out.reshard_after_forward = chosen.sharding == "zero3";
  hybrid = chosen.hybrid;
  if (!offload_params) return;
  if (chosen.sharding != "zero3")
    r.fail("fsdp_config.fsdp_offload_params true with " + chosen.name + " is not supported: trlhpc's " + chosen.name +
           " keeps the full parameters on every rank's device; use FULL_SHARD or HYBRID_SHARD, or set "
           "fsdp_offload_params: false");
  out.offload = "parameters";  // FSDP's CPUOffload(offload_params=True) also steps the optimizer on the host
  out.offload_key = "fsdp_config.fsdp_offload_params true";
}

void read_parallelism(const Reader& r, const YAML::Node& pc, AccelerateConfig& out) {
  const std::pair<const char*, std::optional<int64_t>*> sizes[] = {
      {"parallelism_config_dp_replicate_size", &out.dp_replicate}, {"parallelism_config_dp_shard_size", &out.dp_shard},
      {"parallelism_config_tp_size", &out.tp}, {"parallelism_config_cp_size", &out.cp}, {"parallelism_config_sp_size", &out.sp}};
  for (const auto& kv : pc) {
    const std::string key = r.key(kv.first);
    bool known = kIgnoredParallelism.count(key) != 0;
    for (const auto& [name, target] : sizes) {
      if (key != name) continue;
      known = true;
      const int64_t value = r.integer(kv.second, "parallelism_config." + key);
      if (value < 1 && !(value == -1 && key == "parallelism_config_dp_shard_size"))
        r.fail("parallelism_config." + key + " " + std::to_string(value) + " must be >= 1");
      *target = value;
    }
    if (!known) r.unknown("parallelism_config." + key, kv.first, out);
  }
}

std::string sizes_string(const AccelerateConfig& c) {
  auto v = [](const std::optional<int64_t>& x, int64_t fallback) { return std::to_string(x.value_or(fallback)); };
  return "dp_replicate " + v(c.dp_replicate, 1) + " x dp_shard " + v(c.dp_shard, -1) + " x tp " + v(c.tp, 1) +
         " x cp " + v(c.cp, 1) + " x sp " + v(c.sp, 1);
}

void check_mesh(const Reader& r, const AccelerateConfig& c, int world_size) {
  if (c.distributed_type == "FSDP" && c.dp_replicate.value_or(1) > 1 && c.dp_shard.value_or(-1) == 1)
    r.fail("FSDP with parallelism_config_dp_replicate_size " + std::to_string(*c.dp_replicate) +
           " and parallelism_config_dp_shard_size 1 shards over a single rank: set dp_shard_size > 1 (hybrid sharding) "
           "or use distributed_type: MULTI_GPU");
  if (c.named_profile) return;  // the launcher decides the process count; dp_shard takes the rest
  if (c.num_processes && *c.num_processes != world_size)
    r.fail("num_processes " + std::to_string(*c.num_processes) + " does not match the " + std::to_string(world_size) +
           " ranks of this job (mpirun -np / srun -n): fix num_processes or launch " +
           std::to_string(*c.num_processes) + " ranks");
  const int64_t others = c.dp_replicate.value_or(1) * c.tp.value_or(1) * c.cp.value_or(1) * c.sp.value_or(1);
  const int64_t dp_shard = c.dp_shard.value_or(-1);
  if (dp_shard > 0 ? others * dp_shard != world_size : world_size % others != 0)
    r.fail("parallelism_config " + sizes_string(c) + (dp_shard > 0 ? " = " + std::to_string(others * dp_shard) : "") +
           " does not fit the " + std::to_string(world_size) + " ranks of this job: the product must equal the world size");
}

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

const std::vector<std::string>& accelerate_profile_names() {
  static const std::vector<std::string> names = {"multi_gpu", "zero1", "zero2", "zero3", "fsdp1",
                                                 "fsdp2", "context_parallel_2gpu", "alst_ulysses_4gpu"};
  return names;
}

std::string accelerate_profile_path(const std::string& name) {
  // An installed binary reads its own share/ (the source tree may be gone); a build-tree binary reads
  // the source tree, so editing configs/ needs no install.
  std::vector<fs::path> candidates;
  const std::string exe_dir = executable_dir();
  if (!exe_dir.empty()) candidates.push_back(fs::path(exe_dir) / ".." / "share" / "trlhpc" / "configs" / (name + ".yaml"));
  candidates.push_back(fs::path(TRLHPC_SOURCE_DIR) / "configs" / (name + ".yaml"));
  for (const fs::path& p : candidates)
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  std::string looked;
  for (const fs::path& p : candidates) looked += (looked.empty() ? "" : ", ") + p.string();
  throw UserError("--accelerate_config " + name + ": the profile file is missing (looked in " + looked +
                  "); reinstall trlhpc or pass the path of an accelerate YAML file");
}

AccelerateConfig parse_accelerate_config(const std::string& yaml_text, const std::string& origin, bool named_profile,
                                         int world_size) {
  const Reader r(origin);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    r.fail("invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) r.fail("expected a mapping of accelerate settings (key: value)");
  AccelerateConfig out;
  out.source = origin;
  out.named_profile = named_profile;
  if (root["distributed_type"]) out.distributed_type = r.text(root["distributed_type"], "distributed_type");
  const std::string& type = out.distributed_type;
  if (type != "NO" && type != "MULTI_GPU" && type != "MULTI_CPU" && type != "DEEPSPEED" && type != "FSDP")
    r.fail("distributed_type " + type + " is not supported: use NO, MULTI_GPU, MULTI_CPU, DEEPSPEED or FSDP");
  bool hybrid = false, deepspeed_read = false, fsdp_read = false;
  int64_t num_machines = 1;
  for (const auto& kv : root) {
    const std::string key = r.key(kv.first);
    const YAML::Node& value = kv.second;
    if (key == "distributed_type") continue;
    if (key == "deepspeed_config" || key == "fsdp_config" || key == "parallelism_config") {
      if (value.IsNull()) continue;
      if (!value.IsMap()) r.fail("'" + key + "' must be a mapping");
      if (key == "deepspeed_config") read_deepspeed(r, value, type == "DEEPSPEED", out), deepspeed_read = true;
      if (key == "fsdp_config") read_fsdp(r, value, type == "FSDP", out, hybrid), fsdp_read = true;
      if (key == "parallelism_config") read_parallelism(r, value, out);
    } else if (key == "num_processes") {
      out.num_processes = r.integer(value, key);
    } else if (key == "mixed_precision") {
      out.mixed_precision = r.text(value, key);
      if (out.mixed_precision != "no" && out.mixed_precision != "fp16" && out.mixed_precision != "bf16" &&
          out.mixed_precision != "fp8")
        r.fail("mixed_precision '" + out.mixed_precision + "' is not one of no, fp16, bf16, fp8");
    } else if (key == "num_machines") {
      num_machines = r.integer(value, key);
    } else if (!kIgnoredTop.count(key)) {
      r.unknown(key, kv.first, out);
    }
  }
  if (type == "DEEPSPEED" && !deepspeed_read)
    r.fail("distributed_type DEEPSPEED without deepspeed_config.zero_stage: set zero_stage to 0, 1, 2 or 3");
  if (type == "FSDP" && !fsdp_read) out.sharding = "zero3";  // accelerate's default FULL_SHARD
  // HYBRID_SHARD shards within a node and replicates across nodes unless parallelism_config says otherwise.
  if (hybrid && !out.dp_replicate && num_machines > 1) out.dp_replicate = num_machines;
  if (named_profile) out.dp_shard = -1;  // a profile fixes cp/sp/tp, not the process count
  check_mesh(r, out, world_size);
  return out;
}

AccelerateConfig read_accelerate_config(const std::string& name_or_file, int world_size) {
  const auto& names = accelerate_profile_names();
  const bool named = std::find(names.begin(), names.end(), name_or_file) != names.end();
  const std::string path = named ? accelerate_profile_path(name_or_file) : name_or_file;
  std::ifstream in(path);
  if (!in) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UserError("--accelerate_config " + name_or_file + ": no such file, and not a profile name (" + list + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  AccelerateConfig config = parse_accelerate_config(text.str(), named ? name_or_file + " (" + path + ")" : path, named,
                                                    world_size);
  config.source = name_or_file;
  config.path = path;
  return config;
}

void apply_accelerate_config(const AccelerateConfig& a, const std::set<std::string>& explicit_flags, SftConfig& c) {
  auto given = [&](const char* flag) { return explicit_flags.count(flag) != 0; };
  if (!given("sharding")) c.sharding = a.sharding;
  c.offload = a.offload;
  c.offload_source = a.offload_key.empty() ? std::string() : a.offload_key + " in " + a.path;
  const std::pair<const char*, std::pair<const std::optional<int64_t>*, int64_t*>> sizes[] = {
      {"dp_replicate_size", {&a.dp_replicate, &c.dp_replicate_size}}, {"dp_shard_size", {&a.dp_shard, &c.dp_shard_size}},
      {"tp_size", {&a.tp, &c.tp_size}}, {"cp_size", {&a.cp, &c.cp_size}}, {"sp_size", {&a.sp, &c.sp_size}}};
  for (const auto& [flag, pair] : sizes)
    if (*pair.first && !given(flag)) *pair.second = **pair.first;
  if (a.activation_checkpointing && !given("gradient_checkpointing")) c.gradient_checkpointing = *a.activation_checkpointing;
  // accelerate launch exports mixed_precision and transformers' TrainingArguments keeps it unless
  // --bf16/--fp16 say otherwise: the flag wins, the file fills in.
  if (a.sp_communication_dtype && !given("seq_parallel_communication_data_type"))
    c.seq_parallel_communication_data_type = *a.sp_communication_dtype;
  if (!given("bf16")) {
    if (a.mixed_precision == "bf16") c.bf16 = true;
    if (a.mixed_precision == "fp16" || a.mixed_precision == "fp8")
      throw UserError(a.path + ": mixed_precision: " + a.mixed_precision +
                      " is not supported (trlhpc trains in fp32 or bf16 mixed precision): set it to bf16 or no, or pass --bf16 true|false");
  }
}

}  // namespace trlhpc
