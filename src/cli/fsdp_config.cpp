// --fsdp / --fsdp_config onto trlhpc's strategies (cli/fsdp_config.hpp). The semantics follow transformers
// 5.25 TrainingArguments._process_fsdp_args and _apply_legacy_fsdp_to_config (read, not copied); the
// strategy and offload rules are the accelerate reader's, so --fsdp, --accelerate_config and --deepspeed
// cannot drift apart.
#include "trlhpc/cli/fsdp_config.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>

#include "trlhpc/cli/json_argument.hpp"
#include "trlhpc/cli/trl_fields.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

const std::vector<std::string> kStrategies = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                              "HYBRID_SHARD_ZERO2"};  // torch's ShardingStrategy 1..5

// What --fsdp and --fsdp_config ask for, before the accelerate reader turns it into a strategy.
struct FsdpRequest {
  std::string origin;                     // "--fsdp 'full_shard auto_wrap'" [" with --fsdp_config F"]
  std::string fsdp_text;                  // --fsdp as given, for messages
  int64_t version = 2;                    // transformers' default: FSDP2
  std::optional<std::string> strategy;    // from --fsdp's words (a kStrategies name)
  std::optional<json> reshard;            // fsdp_config reshard_after_forward
  bool offload_word = false;              // --fsdp ... offload
  std::optional<bool> offload_key;        // fsdp_config cpu_offload / offload_params
  bool activation_checkpointing = false;  // fsdp_config activation_checkpointing
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

// str_to_bool's spellings (transformers reads these keys as str(value).lower()).
bool boolean(const json& v, const std::string& where) {
  if (v.is_boolean()) return v.get<bool>();
  const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (v.is_string() || (v.is_number_integer() && (v == 0 || v == 1))) {
    if (trl_value_accepted("true|t|y", text)) return true;
    if (trl_value_accepted("false|f|n", text)) return false;
  }
  throw UserError(where + " must be true or false, got " + v.dump());
}

// --fsdp's value: false when FSDP is off. Words are separated by spaces (transformers splits the string);
// a --config YAML list arrives as its JSON text.
bool read_fsdp_words(const std::string& value, FsdpRequest& r) {
  if (trl_value_accepted("null|false|[]|", value)) return false;
  if (trl_value_accepted("true", value)) return true;
  std::vector<std::string> words;
  if (value.front() == '[') {
    const json list = json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array()) throw UserError("--fsdp '" + value + "': not a list of FSDP options");
    for (const json& item : list) {
      if (!item.is_string()) throw UserError("--fsdp '" + value + "': every item must be a name, got " + item.dump());
      words.push_back(item.get<std::string>());
    }
  } else {
    std::istringstream in(value);
    for (std::string w; in >> w;) words.push_back(w);
  }
  for (const std::string& word : words) {
    const std::string name = upper(word);
    if (std::find(kStrategies.begin(), kStrategies.end(), name) != kStrategies.end()) {
      if (r.strategy && *r.strategy != name)
        throw UserError("--fsdp '" + value + "' names two sharding strategies (" + *r.strategy + ", " + name +
                        "): keep one");
      r.strategy = name;
    } else if (name == "OFFLOAD") {
      r.offload_word = true;
    } else if (name != "AUTO_WRAP") {  // auto_wrap: trlhpc always shards per decoder layer
      throw UserError("--fsdp '" + value + "': unknown FSDP option '" + word +
                      "': use full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2, offload, auto_wrap");
    }
  }
  return true;
}

void require_value(bool ok, const std::string& where, const json& value, const std::string& use) {
  if (!ok) throw UserError(where + " " + value.dump() + " is not supported: " + use);
}

// One fsdp_config key (its fsdp_ prefix removed). Keys that change nothing here are checked for the
// value that means nothing; scheduling details (prefetching, loading) give the same numbers either way.
void read_fsdp_key(const std::string& key, const json& value, const std::string& origin, FsdpRequest& r,
                   std::vector<std::string>& notes) {
  const std::string where = origin + ": " + key;
  if (key == "version") {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (text != "1" && text != "2") throw UserError(where + " " + value.dump() + " does not exist: use 1 or 2");
    r.version = text == "1" ? 1 : 2;
  } else if (key == "reshard_after_forward") {
    r.reshard = value;
  } else if (key == "cpu_offload" || key == "offload_params") {
    r.offload_key = boolean(value, where);
  } else if (key == "activation_checkpointing") {
    r.activation_checkpointing = boolean(value, where);
  } else if (key == "auto_wrap_policy") {
    require_value(value == "TRANSFORMER_BASED_WRAP", where, value,
                  "trlhpc shards and gathers one decoder layer at a time (its wrap unit): use TRANSFORMER_BASED_WRAP");
  } else if (key == "transformer_layer_cls_to_wrap") {
    const json names = value.is_string() ? json::array({value}) : value;
    bool layers = names.is_array() || names.is_null();
    for (const json& n : names.is_array() ? names : json::array())
      layers = layers && n.is_string() && n.get<std::string>().size() > 12 &&
               n.get<std::string>().ends_with("DecoderLayer");
    require_value(layers, where, value,
                  "trlhpc wraps each decoder layer: name the model's decoder layer class (Qwen2DecoderLayer, "
                  "LlamaDecoderLayer, ...) or leave it out");
  } else if (key == "min_num_params") {
    require_value(value.is_number_integer() && value.get<int64_t>() >= 0, where, value,
                  "use an integer >= 0 (it is read only by SIZE_BASED_WRAP, which trlhpc does not have)");
  } else if (key == "state_dict_type") {
    require_value(value == "FULL_STATE_DICT", where, value,
                  "trlhpc's checkpoints are its own per-rank files and the model one full model.safetensors: use "
                  "FULL_STATE_DICT");
  } else if (key == "xla") {
    require_value(!boolean(value, where), where, value, "PyTorch/XLA (TPU) FSDP is not built: set xla false");
  } else if (key == "backward_prefetch") {
    require_value(value.is_string() && (upper(value.get<std::string>()) == "BACKWARD_PRE" ||
                                        upper(value.get<std::string>()) == "BACKWARD_POST" ||
                                        upper(value.get<std::string>()) == "NO_PREFETCH"),
                  where, value, "use BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH (trlhpc schedules its own prefetch)");
  } else if (key == "cpu_ram_efficient_loading" || key == "forward_prefetch" || key == "use_orig_params" ||
             key == "sync_module_states" || key == "limit_all_gathers") {
    boolean(value, where);
  } else if (key == "xla_fsdp_settings" || key == "xla_fsdp_v2" || key == "xla_fsdp_grad_ckpt") {
    // read by transformers only with xla true, refused above
  } else {
    notes.push_back(where + ": unknown key ignored (transformers ignores it too)");
  }
}

void read_fsdp_config(const std::string& source, FsdpRequest& r, std::vector<std::string>& notes) {
  std::string origin;
  const json config = read_json_argument("fsdp_config", source, "an FSDP config", origin);
  r.origin += " with " + origin;
  json keys = json::object();
  for (const auto& [key, value] : config.items()) {
    const std::string name = key.rfind("fsdp_", 0) == 0 ? key.substr(5) : key;
    if (keys.contains(name))
      throw UserError(origin + ": " + name + " is given twice (with and without the fsdp_ prefix): keep one");
    keys[name] = value;
  }
  for (const auto& [key, value] : keys.items()) read_fsdp_key(key, value, origin, r, notes);
}

// A strategy name from a reshard_after_forward value (FSDP2: a bool; FSDP1: the strategy) or --fsdp's word.
std::string strategy_of(const json& value, const std::string& where, int64_t version) {
  std::string name;
  if (value.is_boolean() || (value.is_string() && trl_value_accepted("true|false", value.get<std::string>())))
    name = boolean(value, where) ? "FULL_SHARD" : "SHARD_GRAD_OP";
  else if (value.is_string())
    name = upper(value.get<std::string>());
  else if (value.is_number_integer() && value.get<int64_t>() >= 1 && value.get<int64_t>() <= 5)
    name = kStrategies[value.get<size_t>() - 1];
  if (std::find(kStrategies.begin(), kStrategies.end(), name) == kStrategies.end())
    throw UserError(where + " " + value.dump() + " is not a sharding strategy: use true or false (version 2), or " +
                    "full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2 (version 1)");
  if (version == 2 && name != "FULL_SHARD" && name != "SHARD_GRAD_OP")
    throw UserError(where + " " + value.dump() + " exists only in FSDP1 (transformers refuses it under FSDP2, the " +
                    "default): add \"version\": 1 to --fsdp_config, or use full_shard / shard_grad_op");
  return name;
}

std::string chosen_strategy(const FsdpRequest& r) {
  std::optional<std::string> from_word, from_config;
  if (r.strategy) from_word = strategy_of(json(*r.strategy), "--fsdp " + *r.strategy, r.version);
  if (r.reshard) from_config = strategy_of(*r.reshard, r.origin + ": reshard_after_forward", r.version);
  if (from_word && from_config && *from_word != *from_config)
    throw UserError("--fsdp '" + r.fsdp_text + "' (" + *from_word + ") and --fsdp_config reshard_after_forward " +
                    r.reshard->dump() + " (" + *from_config + ") disagree: keep one of them");
  return from_config.value_or(from_word.value_or("FULL_SHARD"));
}

// The strategy against the other sources of one: each contradiction names both.
void check_sources(const FsdpRequest& r, const AccelerateConfig& mapped, const std::string& strategy,
                   const std::set<std::string>& explicit_flags, int world_size, const AccelerateConfig* accelerate,
                   const SftConfig& c) {
  const std::string mine = r.origin + " (" + strategy + ": sharding " + mapped.sharding + ", offload " + mapped.offload + ")";
  if (!c.deepspeed.empty())
    throw UserError(r.origin + " and --deepspeed both choose the distributed strategy: give one of them");
  if (accelerate && (accelerate->sharding != mapped.sharding || accelerate->offload != mapped.offload))
    throw UserError(mine + " contradicts --accelerate_config " + accelerate->source + " (sharding " +
                    accelerate->sharding + ", offload " + accelerate->offload + "): make them agree or give one of them");
  if (explicit_flags.count("sharding") && c.sharding != mapped.sharding)
    throw UserError(mine + " contradicts --sharding " + c.sharding + ": drop one of them");
  const bool hybrid = strategy.rfind("HYBRID", 0) == 0;
  if (!hybrid && explicit_flags.count("dp_replicate_size") && c.dp_replicate_size > 1)
    throw UserError(mine + " shards over every data-parallel rank, but --dp_replicate_size " +
                    std::to_string(c.dp_replicate_size) + " replicates: use hybrid_shard (fsdp_config version 1) or "
                    "drop --dp_replicate_size");
  if (mapped.sharding != "none" && world_size > 1 && explicit_flags.count("dp_shard_size") && c.dp_shard_size == 1 &&
      c.cp_size == 1)
    throw UserError(mine + " shards over dp_shard x cp ranks, but --dp_shard_size 1 (cp 1) leaves one: raise "
                    "--dp_shard_size, or use --fsdp no_shard");
}

}  // namespace

void check_fsdp_words(const std::string& value) {
  FsdpRequest scratch;
  read_fsdp_words(value, scratch);
}

void apply_fsdp_arguments(const std::set<std::string>& explicit_flags, int world_size,
                          const AccelerateConfig* accelerate, SftConfig& c, std::vector<std::string>& notes) {
  FsdpRequest r;
  r.fsdp_text = c.fsdp;
  r.origin = "--fsdp '" + c.fsdp + "'";
  const bool on = read_fsdp_words(c.fsdp, r);
  const bool has_config = !trl_value_accepted("null|{}|", c.fsdp_config);
  if (!on) {
    if (has_config)
      throw UserError("--fsdp_config is read only with --fsdp (as in transformers): add --fsdp true, or drop "
                      "--fsdp_config");
    return;
  }
  if (has_config) read_fsdp_config(c.fsdp_config, r, notes);
  const std::string strategy = chosen_strategy(r);
  if (r.offload_key && !*r.offload_key && r.offload_word)
    throw UserError(r.origin + ": --fsdp offload and fsdp_config cpu_offload false disagree: keep one of them");
  const bool offload = r.offload_key.value_or(r.offload_word);
  if (offload && strategy != "FULL_SHARD" && strategy != "HYBRID_SHARD")
    throw UserError(r.origin + ": CPU offload with " + strategy + " is not supported (trlhpc keeps the full " +
                    "parameters on every rank's device there): use full_shard or hybrid_shard, or drop the offload");
  // The accelerate reader owns the strategy and offload rules (accelerate_config.hpp).
  std::ostringstream yaml;
  yaml << "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: " << r.version
       << "\n  fsdp_reshard_after_forward: " << strategy << "\n  fsdp_offload_params: " << (offload ? "true" : "false")
       << "\n";
  const AccelerateConfig mapped =
      parse_accelerate_config(yaml.str(), r.origin + " (as accelerate's fsdp_config)", /*named_profile=*/false, world_size);
  check_sources(r, mapped, strategy, explicit_flags, world_size, accelerate, c);
  c.sharding = mapped.sharding;
  c.offload = mapped.offload;
  c.offload_source = offload ? r.origin + (r.offload_key ? " cpu_offload" : " offload") : std::string();
  if (r.activation_checkpointing) c.gradient_checkpointing = true;
  notes.push_back(r.origin + ": FSDP" + std::to_string(r.version) + " " + strategy + " -> --sharding " + c.sharding +
                  (offload ? ", offload parameters" : "") + (r.activation_checkpointing ? ", gradient_checkpointing" : ""));
}

}  // namespace trlhpc
