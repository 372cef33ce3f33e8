#include "trlhpc/cli/sft_options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/cli/deepspeed_config.hpp"
#include "trlhpc/cli/fsdp_config.hpp"
#include "trlhpc/cli/trl_fields.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/dataset_mixture.hpp"
#include "trlhpc/comm/progress_thread.hpp"

namespace po = boost::program_options;

namespace trlhpc {
namespace {

// TRL-style booleans: `--packing` alone means true; `--packing false` is accepted too.
po::typed_value<bool>* flag(bool* target) {
  return po::value<bool>(target)->implicit_value(true)->default_value(*target);
}

// The option groups of `trlhpc sft --help`, one function each; describe() joins them.
po::options_description model_and_data_options(SftConfig& c, std::string& config_file) {
  po::options_description model("Model and data");
  model.add_options()
      ("config", po::value<std::string>(&config_file), "YAML file with any of these options as keys")
      ("model_name_or_path", po::value<std::string>(&c.model_name_or_path), "Hugging Face model directory, or a hub id (ORG/NAME) in the local Hugging Face cache")
      ("model_revision", po::value<std::string>(&c.model_revision)->default_value(c.model_revision), "branch, tag or commit sha of a hub id")
      ("model_config", po::value<std::string>(&c.model_config), "config.json of a randomly initialised model")
      ("tokenizer", po::value<std::string>(&c.tokenizer), "tokenizer directory (default: the model directory)")
      ("dataset_name", po::value<std::string>(&c.dataset_name), ".jsonl/.json/.parquet file, a directory of them, or a hub dataset id in the local cache")
      ("dataset_config", po::value<std::string>(&c.dataset_config), "config of the dataset card's configs: block (README.md), else the subset folder NAME/")
      ("dataset_train_split", po::value<std::string>(&c.dataset_train_split)->default_value(c.dataset_train_split), "split trained on (file/folder names as datasets infers them)")
      ("dataset_test_split", po::value<std::string>(&c.dataset_test_split)->default_value(c.dataset_test_split), "split evaluated on when --eval_strategy is not no (and of --eval_dataset)")
      ("streaming", flag(&c.streaming), "TRL's mixture streaming (accepted; trlhpc streams rows from disk either way)")
      ("test_split_size", po::value<double>(&c.test_split_size)->default_value(c.test_split_size), "cut this fraction off a datasets: mixture as its test split (0: none)")
      ("dataset_text_field", po::value<std::string>(&c.dataset_text_field)->default_value(c.dataset_text_field), "field of language-modeling rows")
      ("eval_dataset", po::value<std::string>(&c.eval_dataset), "held-out dataset for eval_loss")
      ("chat_template_path", po::value<std::string>(&c.chat_template_path), "Jinja chat template file overriding the tokenizer's")
      ("chat_template_kwargs", po::value<std::string>(&c.chat_template_kwargs),
       "JSON object of chat template variables for every row, e.g. '{\"enable_thinking\": false}' (a row's chat_template_kwargs column wins)")
      ("output_dir", po::value<std::string>(&c.output_dir)->default_value(c.output_dir), "where metrics, checkpoints and the model go")
      ("overwrite_output_dir", flag(&c.overwrite_output_dir),
       "a fresh run may replace an earlier run's checkpoints, metrics.jsonl and model in --output_dir (removed, and listed in the log)")
      ("skip_bad_rows", flag(&c.skip_bad_rows), "skip (and count) dataset rows that do not fit instead of failing")
      ("dataset_cache_dir", po::value<std::string>(&c.dataset_cache_dir), "cache of tokenized datasets (default: <output_dir>/.dataset_cache; none: off)");
  return model;
}

po::options_description training_options(SftConfig& c) {
  po::options_description train("Training");
  train.add_options()
      ("max_steps", po::value<int64_t>(&c.max_steps)->default_value(c.max_steps), "optimizer steps (-1: use epochs)")
      ("num_train_epochs", po::value<double>(&c.num_train_epochs)->default_value(c.num_train_epochs), "epochs when max_steps is -1")
      ("per_device_train_batch_size", po::value<int64_t>(&c.per_device_train_batch_size)->default_value(c.per_device_train_batch_size), "rows per micro-batch per dp rank")
      ("per_device_eval_batch_size", po::value<int64_t>(&c.per_device_eval_batch_size)->default_value(c.per_device_eval_batch_size), "rows per evaluation micro-batch per dp rank")
      ("gradient_accumulation_steps", po::value<int64_t>(&c.gradient_accumulation_steps)->default_value(c.gradient_accumulation_steps), "micro-batches per optimizer step")
      ("learning_rate", po::value<double>(&c.learning_rate)->default_value(c.learning_rate), "peak learning rate")
      ("lr_scheduler_type", po::value<std::string>(&c.lr_scheduler_type)->default_value(c.lr_scheduler_type), "linear|cosine|cosine_with_min_lr|constant|constant_with_warmup (--lr_scheduler_kwargs: min_lr_rate, num_cycles)")
      ("warmup_steps", po::value<int64_t>(&c.warmup_steps)->default_value(c.warmup_steps), "")
      ("warmup_ratio", po::value<double>(&c.warmup_ratio)->default_value(c.warmup_ratio), "")
      ("weight_decay", po::value<double>(&c.weight_decay)->default_value(c.weight_decay), "AdamW decoupled weight decay (not on biases and norms)")
      ("adam_beta1", po::value<double>(&c.adam_beta1)->default_value(c.adam_beta1), "")
      ("adam_beta2", po::value<double>(&c.adam_beta2)->default_value(c.adam_beta2), "")
      ("adam_epsilon", po::value<double>(&c.adam_epsilon)->default_value(c.adam_epsilon), "")
      ("max_grad_norm", po::value<double>(&c.max_grad_norm)->default_value(c.max_grad_norm), "global-norm clipping (0: off)")
      ("label_smoothing_factor", po::value<double>(&c.label_smoothing_factor)->default_value(c.label_smoothing_factor),
       "transformers' label smoothing eps in [0, 1]: (1 - eps) nll + eps mean_v(-log p_v) per target token")
      ("loss_type", po::value<std::string>(&c.loss_type)->default_value(c.loss_type),
       "nll | dft (TRL's DFT: each token's nll times its detached probability; ignores label smoothing)")
      ("seed", po::value<uint64_t>(&c.seed)->default_value(c.seed), "init and data-order seed")
      ("max_length", po::value<int64_t>(&c.max_length)->default_value(c.max_length), "tokens per example / packed row")
      ("packing", flag(&c.packing), "pack examples into max_length rows")
      ("packing_strategy", po::value<std::string>(&c.packing_strategy)->default_value(c.packing_strategy), "bfd|wrapped")
      ("padding_free", flag(&c.padding_free), "concatenate a micro-batch without pad tokens")
      ("pad_to_multiple_of", po::value<int64_t>(&c.pad_to_multiple_of)->default_value(c.pad_to_multiple_of), "")
      ("completion_only_loss", po::value<std::string>(&c.completion_only_loss)->default_value(c.completion_only_loss), "true|false|auto (auto: on for prompt-completion data)")
      ("assistant_only_loss", flag(&c.assistant_only_loss), "train only on assistant turns")
      ("gradient_checkpointing", flag(&c.gradient_checkpointing), "recompute layers in backward")
      ("seq_parallel_communication_data_type", po::value<std::string>(&c.seq_parallel_communication_data_type),
       "fp32|bf16: under --bf16, the dtype of Ulysses' attention-gradient all-to-alls (activations travel in bf16)")
      ("save_dtype", po::value<std::string>(&c.save_dtype),
       "dtype of the final model.safetensors: auto (the input config's torch_dtype) | float32 | bfloat16")
      ("bf16", flag(&c.bf16), "bf16 mixed precision: bf16 GEMMs and activations, fp32 master weights, optimizer and loss (docs/guide/precision-and-offload.md)")
      ("logging_steps", po::value<int64_t>(&c.logging_steps)->default_value(c.logging_steps), "")
      ("report_to", po::value<std::string>(&c.report_to)->default_value(c.report_to), "tensorboard|all|none: also write the metrics as TensorBoard event files")
      ("logging_dir", po::value<std::string>(&c.logging_dir), "TensorBoard folder (default: <output_dir>/runs/<date>_<host>)")
      ("plot", flag(&c.plot), "at the end, draw <output_dir>/loss.png from metrics.jsonl (gnuplot, as trlhpc plot)")
      ("save_steps", po::value<int64_t>(&c.save_steps)->default_value(c.save_steps), "")
      ("save_total_limit", po::value<int64_t>(&c.save_total_limit)->default_value(c.save_total_limit), "")
      ("async_save", flag(&c.async_save),
       "write checkpoints in the background from a host copy while training continues (needs MPI_THREAD_MULTIPLE)")
      ("resume_from_checkpoint", po::value<std::string>(&c.resume_from_checkpoint), "DIR, latest, or auto (latest if there is one, else start fresh)")
      ("eval_steps", po::value<int64_t>(&c.eval_steps)->default_value(c.eval_steps), "")
      ("eval_strategy", po::value<std::string>(&c.eval_strategy)->default_value(c.eval_strategy), "no|steps (steps: evaluate on --dataset_test_split every --eval_steps)")
      ("dataloader_drop_last", flag(&c.dataloader_drop_last),
       "drop the incomplete last batch of each epoch (HF's default: false, a smaller last step)")
      ("shuffle_dataset", po::value<bool>(&c.shuffle_dataset)->default_value(c.shuffle_dataset), "")
      ("peak_flops", po::value<double>(&c.peak_flops)->default_value(c.peak_flops), "peak FLOP/s per rank for MFU (0: measure)")
      ("loss_chunk_tokens", po::value<int64_t>(&c.loss_chunk_tokens)->default_value(c.loss_chunk_tokens), "logit rows materialised at once")
      ("skip_nonfinite_steps", flag(&c.skip_nonfinite_steps),
       "skip (and count) a step whose loss or grad norm is NaN/inf instead of stopping with an error");
  return train;
}

po::options_description peft_options(SftConfig& c) {
  po::options_description peft("LoRA (PEFT), as TRL's ModelConfig");
  peft.add_options()
      ("use_peft", flag(&c.use_peft), "train LoRA adapters on the frozen model (docs/guide/lora.md)")
      ("lora_r", po::value<int64_t>(&c.lora_r)->default_value(c.lora_r), "adapter rank")
      ("lora_alpha", po::value<double>(&c.lora_alpha)->default_value(c.lora_alpha), "scale = lora_alpha / lora_r")
      ("lora_dropout", po::value<double>(&c.lora_dropout)->default_value(c.lora_dropout), "dropout on the adapters' input")
      ("lora_target_modules", po::value<std::vector<std::string>>(&c.lora_target_modules)->multitoken(),
       "modules to adapt: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all-linear (default: q_proj v_proj)")
      ("lora_modules_to_save", po::value<std::vector<std::string>>(&c.lora_modules_to_save)->multitoken(),
       "modules trained in full besides the adapters, as PEFT's modules_to_save: embed_tokens, lm_head, model.norm")
      ("use_rslora", flag(&c.use_rslora), "rank-stabilised scale lora_alpha / sqrt(lora_r)")
      ("use_dora", flag(&c.use_dora), "weight-decomposed LoRA (not supported: refused)");
  return peft;
}

po::options_description parallel_options(SftConfig& c) {
  po::options_description parallel("Parallelism");
  parallel.add_options()
      ("accelerate_config", po::value<std::string>(&c.accelerate_config), "profile name or accelerate YAML file")
      ("dp_replicate_size", po::value<int64_t>(&c.dp_replicate_size)->default_value(c.dp_replicate_size), "")
      ("dp_shard_size", po::value<int64_t>(&c.dp_shard_size)->default_value(c.dp_shard_size), "-1: the rest of the world")
      ("tp_size", po::value<int64_t>(&c.tp_size)->default_value(c.tp_size), "")
      ("tp_sequence_parallel", flag(&c.tp_sequence_parallel),
       "shard norms/residual stream over tp too (reduce-scatter/all-gather instead of all-reduce)")
      ("cp_size", po::value<int64_t>(&c.cp_size)->default_value(c.cp_size), "")
      ("sp_size", po::value<int64_t>(&c.sp_size)->default_value(c.sp_size), "")
      ("sharding", po::value<std::string>(&c.sharding)->default_value(c.sharding), "none|zero1|zero2|zero3")
      ("bucket_size_mb", po::value<int64_t>(&c.bucket_size_mb)->default_value(c.bucket_size_mb), "DDP gradient bucket size")
      ("device", po::value<std::string>(&c.device)->default_value(c.device), "auto|cpu|cuda")
      ("ddp_timeout", po::value<double>(&c.ddp_timeout)->default_value(c.ddp_timeout),
       "seconds a collective may wait for the other ranks before the job aborts (exit 2); 0: no limit")
      ("comm_progress", po::value<std::string>(&c.comm_progress)->default_value(c.comm_progress),
       "thread|none: a progress thread advances gradient reductions, ZeRO gathers and ring attention transfers "
       "while compute runs (thread), or only the training thread's own MPI calls do (none)");
  return parallel;
}

po::options_description kernel_options(SftConfig& c) {
  po::options_description kernels("Kernels (one choice per process; trlhpc env shows it)");
  kernels.add_options()
      ("cpu_gemm", po::value<std::string>(&c.cpu_gemm)->default_value(c.cpu_gemm),
       "auto|avx512|avx2|openblas: the CPU fp32 GEMM (auto: the widest the CPU runs)")
      ("cpu_bf16_gemm", po::value<std::string>(&c.cpu_bf16_gemm)->default_value(c.cpu_bf16_gemm),
       "auto|amx|avx512bf16|f32: the CPU bf16 GEMM engine of --bf16 (f32: fp32 GEMM on bf16-rounded inputs)")
      ("cuda_attention", po::value<std::string>(&c.cuda_attention)->default_value(c.cuda_attention),
       "auto|cudnn|kernel: cuDNN's fused attention or trlhpc's flash kernel (auto: the kernel until measured)");
  return kernels;
}

po::options_description describe(SftConfig& c, std::string& config_file) {
  po::options_description all("trlhpc sft options");
  all.add(model_and_data_options(c, config_file)).add(training_options(c)).add(peft_options(c));
  all.add(parallel_options(c)).add(kernel_options(c));
  all.add_options()("help,h", "print this help")(
      "help_trl_fields", "print how every argument of TRL's SFTConfig, ModelConfig, ScriptArguments and "
      "DatasetMixtureConfig is handled: honored, mapped, no-op or refused (docs/guide/trl-arguments.md)");
  return all;
}

// The TRL arguments that are not trlhpc options (cli/trl_fields.hpp), as strings checked after parsing.
// `--fp16` alone means true, as for the flags above. Renamed spellings are rewritten before parsing.
po::options_description describe_trl(const po::options_description& native, std::vector<std::string>& names) {
  po::options_description trl("TRL arguments (trlhpc sft --help_trl_fields)");
  for (const TrlField& field : trl_fields()) {
    if (field.rename_to || native.find_nothrow(field.name, false)) continue;
    trl.add_options()(field.name, po::value<std::string>()->implicit_value("true"), field.what);
    names.push_back(field.name);
  }
  return trl;
}

// No prefix guessing: a misspelt flag must be an error, not silently another option.
constexpr int kStyle = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;

// A flag given more than once keeps its last value, as argparse (TRL's and accelerate's CLIs) does: job
// scripts append overrides to a base command. boost would refuse the repetition.
// Every value is still checked (argparse converts each occurrence): an overridden one is stored into a
// throwaway map, which converts it without touching the config (only notify() writes there).
po::parsed_options keep_last_occurrences(po::parsed_options parsed) {
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    if (it->unregistered || it->string_key.empty() || seen.insert(it->string_key).second) {
      kept.push_back(*it);
      continue;
    }
    po::parsed_options overridden(parsed.description);
    overridden.options.push_back(*it);
    po::variables_map scratch;
    po::store(overridden, scratch);
  }
  parsed.options.assign(kept.rbegin(), kept.rend());
  return parsed;
}

po::parsed_options parse(const std::vector<std::string>& args, const po::options_description& desc) {
  return keep_last_occurrences(po::command_line_parser(args).options(desc).style(kStyle).run());
}

// A YAML node as JSON: plain scalars typed as YAML 1.2's core schema reads them (null, true/false,
// integers, floats), quoted scalars as strings.
nlohmann::ordered_json yaml_to_json(const YAML::Node& node, const std::string& where) {
  if (node.IsMap()) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) throw UserError(where + "a mapping key must be a name");
      object[kv.first.as<std::string>()] = yaml_to_json(kv.second, where);
    }
    return object;
  }
  if (node.IsSequence()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& item : node) list.push_back(yaml_to_json(item, where));
    return list;
  }
  if (node.IsNull()) return nullptr;
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const nlohmann::ordered_json number = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  return number.is_number() ? number : nlohmann::ordered_json(text);
}

// A refused value of a YAML entry ({"--fp16", "true"}) fails here, so that the message names the file and
// line; the value is applied later, with the command line's, by parse_sft_options.
void refuse_trl_value(const std::vector<std::string>& entry, const std::vector<std::string>& trl_names) {
  const std::string name = entry[0].substr(2);
  if (entry.size() != 2 || std::find(trl_names.begin(), trl_names.end(), name) == trl_names.end()) return;
  SftConfig scratch;
  std::vector<std::string> notes;
  apply_trl_field(*find_trl_field(name), entry[1], {}, scratch, notes);
}

// YAML scalars become "--key value" tokens so one parser (and one set of error messages) serves both.
// Each entry is first parsed on its own, so an unknown key or a bad value names the file and its line
// (a config file is not a command line: "unrecognised option '--lr'" would send the user to the wrong place).
// The one list-valued key, TRL's `datasets:` mixture, is parsed into `mixture` instead.
std::vector<std::string> yaml_as_args(const std::string& path, const po::options_description& desc,
                                      const std::vector<std::string>& trl_names,
                                      std::vector<dataset::DatasetEntry>& mixture, std::vector<std::string>& notes) {
  if (!std::filesystem::exists(path)) throw UserError("--config " + path + ": file not found");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw UserError("--config " + path + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  std::vector<std::string> args;
  if (root.IsNull()) return args;
  if (!root.IsMap()) throw UserError("--config " + path + ": expected a mapping of option: value");
  for (const auto& kv : root) {
    const std::string where = "--config " + path + ":" + std::to_string(kv.first.Mark().line + 1) + ": ";
    if (!kv.first.IsScalar()) throw UserError(where + "a key must be an option name, not a list or mapping");
    const std::string key = kv.first.as<std::string>();
    const bool known = key != "config" && key != "help" && key != "help_trl_fields" &&
                       (desc.find_nothrow(key, false) || find_trl_field(key));
    if (!known)
      throw UserError(where + "unknown option '" + key + "' (trlhpc sft --help lists the options; a YAML key is the "
                      "option without its leading --)");
    // TRL writes None (and DatasetMixtureConfig's empty list) for an unset field: trlhpc's default stays.
    if (kv.second.IsNull() || (key == "datasets" && kv.second.IsSequence() && kv.second.size() == 0)) continue;
    if (key == "datasets") {
      mixture = dataset::parse_dataset_mixture(kv.second, path);
      continue;
    }
    // List-valued options (lora_target_modules: [q_proj, v_proj]) take a YAML list or one scalar;
    // chat_template_kwargs a YAML mapping ({enable_thinking: false}) or its JSON text.
    // TRL arguments that are no trlhpc option take any YAML value, as JSON text (lr_scheduler_kwargs: {}).
    const bool list_option = key == "lora_target_modules" || key == "lora_modules_to_save";
    const bool trl_only = std::find(trl_names.begin(), trl_names.end(), key) != trl_names.end();
    if ((key == "chat_template_kwargs" || trl_only) && (kv.second.IsMap() || kv.second.IsSequence())) {
      const std::vector<std::string> entry = rewrite_trl_arguments({"--" + key, yaml_to_json(kv.second, where).dump()}, &notes);
      try {
        refuse_trl_value(entry, trl_names);
      } catch (const UserError& e) {
        throw UserError(where + e.what());
      }
      args.insert(args.end(), entry.begin(), entry.end());
      continue;
    }
    // A one-item list for a single-valued option (transformers writes report_to: [tensorboard]); an
    // empty one leaves the default.
    YAML::Node value = kv.second;
    if (value.IsSequence() && !list_option) {
      if (value.size() == 0) continue;
      if (value.size() == 1 && value[0].IsScalar()) value = value[0];
    }
    if (!value.IsScalar() && !(list_option && value.IsSequence()))
      throw UserError(where + "option '" + key + "' must be a single value");
    std::vector<std::string> entry = {"--" + key};
    if (value.IsSequence()) {
      for (const auto& item : value) {
        if (!item.IsScalar()) throw UserError(where + "option '" + key + "' takes a list of names");
        entry.push_back(item.as<std::string>());
      }
    } else {
      entry.push_back(value.as<std::string>());
    }
    entry = rewrite_trl_arguments(entry, &notes);
    try {
      po::variables_map scratch;
      po::store(parse(entry, desc), scratch);
      refuse_trl_value(entry, trl_names);
    } catch (const po::error& e) {
      throw UserError(where + e.what());
    } catch (const UserError& e) {
      throw UserError(where + e.what());
    }
    args.insert(args.end(), entry.begin(), entry.end());
  }
  return args;
}

}  // namespace

namespace {

// Each note once, in order: a flag given twice, or in the file and on the command line, says it once.
void report_notes(const std::vector<std::string>& notes, const SftOptionContext& context) {
  std::set<std::string> said;
  for (const std::string& note : notes) {
    if (!said.insert(note).second) continue;
    if (context.notes) context.notes->push_back(note);
    else if (context.is_main) std::fprintf(stderr, "trlhpc: note: %s\n", note.c_str());
  }
}

}  // namespace

bool parse_sft_options(const std::vector<std::string>& args, SftConfig& config, std::string* help_text,
                       const SftOptionContext& context) {
  std::string config_file;
  po::options_description desc = describe(config, config_file);
  std::vector<std::string> trl_names, notes;
  po::options_description everything;
  everything.add(desc).add(describe_trl(desc, trl_names));
  po::variables_map vm;
  try {
    po::store(parse(rewrite_trl_arguments(args, &notes), everything), vm);
    if (vm.count("help") || vm.count("help_trl_fields")) {
      std::ostringstream os;
      if (vm.count("help_trl_fields")) os << trl_field_table_markdown();
      else os << "usage: trlhpc sft [--config FILE.yaml] [options]\n\n" << desc
              << "\nEvery other argument of TRL's SFTConfig, ModelConfig and ScriptArguments is mapped, accepted as a "
                 "no-op or refused by name: trlhpc sft --help_trl_fields\n";
      if (help_text) *help_text = os.str();
      return false;
    }
    if (vm.count("config")) {
      const std::string file = vm["config"].as<std::string>();
      // Command-line values were stored first, so they win over the file (po::store keeps the first).
      po::store(parse(yaml_as_args(file, everything, trl_names, config.datasets, notes), everything), vm);
      if (!config.datasets.empty()) config.datasets_config_file = file;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc sft: ") + e.what() + " (see trlhpc sft --help)");
  }
  if (!(std::isfinite(config.ddp_timeout) && config.ddp_timeout >= 0)) {
    std::ostringstream os;
    os << "--ddp_timeout " << config.ddp_timeout << ": must be a number of seconds >= 0 (0: no limit; default 1800)";
    throw UserError(os.str());
  }
  // HF's TrainingArguments: with eval_strategy "steps" and no eval_steps, evaluate every logging_steps.
  if (config.eval_strategy == "steps" && vm["eval_steps"].defaulted()) config.eval_steps = config.logging_steps;
  parse_comm_progress(config.comm_progress);  // UserError naming the flag, on every rank alike
  std::set<std::string> explicit_flags;  // given on the command line or in --config: they win
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) explicit_flags.insert(name);
  // TRL arguments that are no trlhpc option: checked (refusals name the field) and applied, in table order.
  for (const std::string& name : trl_names)
    if (vm.count(name)) apply_trl_field(*find_trl_field(name), vm[name].as<std::string>(), explicit_flags, config, notes);
  if (!config.deepspeed.empty()) apply_deepspeed_config(explicit_flags, context.world_size, config, notes);
  report_notes(notes, context);
  std::optional<AccelerateConfig> accelerate;
  if (!config.accelerate_config.empty()) {
    accelerate = read_accelerate_config(config.accelerate_config, context.world_size);
    if (context.is_main)
      for (const std::string& warning : accelerate->warnings) std::fprintf(stderr, "trlhpc: warning: %s\n", warning.c_str());
    apply_accelerate_config(*accelerate, explicit_flags, config);
  }
  // After the accelerate file: its mesh sizes stay, and its strategy must agree with --fsdp's.
  std::vector<std::string> fsdp_notes;
  if (!config.fsdp.empty() || !config.fsdp_config.empty())
    apply_fsdp_arguments(explicit_flags, context.world_size, accelerate ? &*accelerate : nullptr, config, fsdp_notes);
  report_notes(fsdp_notes, context);
  return true;
}

}  // namespace trlhpc
