#include "trlhpc/cli/export_command.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/peft_adapter.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/comm/backend_communicators.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/model_export.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

struct ExportOptions {
  std::string checkpoint, output_dir, device = "cpu";
  bool help = false;
  bool merge = false;
};

ExportOptions parse(const std::vector<std::string>& args, std::string* help) {
  namespace po = boost::program_options;
  ExportOptions o;
  po::options_description desc("usage: trlhpc export CHECKPOINT|ADAPTER_DIR --output_dir DIR [--merge]");
  desc.add_options()("help,h", po::bool_switch(&o.help), "print this help")(
      "checkpoint", po::value<std::string>(&o.checkpoint),
      "a checkpoint-STEP folder or a PEFT LoRA adapter directory (or give it first, unnamed)")(
      "merge", po::bool_switch(&o.merge),
      "LoRA: write the base model with the adapter merged in (PEFT's merge_and_unload) instead of the adapter")(
      "output_dir", po::value<std::string>(&o.output_dir), "where to write the Hugging Face model directory")(
      "device", po::value<std::string>(&o.device)->default_value(o.device),
      "cpu|cuda|auto: where the gathered parameters live (an export computes nothing, so cpu by default)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc export: ") + e.what() + " (see trlhpc export --help)");
  }
  std::ostringstream text;
  text << desc;
  *help = text.str();
  if (o.help) return o;
  if (o.checkpoint.empty()) throw UserError("trlhpc export: name the checkpoint folder (trlhpc export CHECKPOINT --output_dir DIR)");
  if (o.output_dir.empty()) throw UserError("trlhpc export: --output_dir DIR is required");
  return o;
}

// Where a LoRA checkpoint's adapter is staged before --merge merges it.
std::string adapter_staging(const std::string& output_dir) {
  const std::filesystem::path dir = std::filesystem::path(output_dir).lexically_normal();
  std::string name = ".";
  name += dir.filename().string();
  name += ".adapter";
  return (dir.parent_path() / name).string();
}

// A PEFT adapter directory merged into its base (PEFT's merge_and_unload), written as a model directory
// with the adapter's tokenizer files (else the base's).
void export_merged_adapter(const std::string& adapter_dir, const std::string& output_dir, const std::string& device,
                           MpiEnvironment& mpi) {
  PeftAdapterDir adapter(adapter_dir);
  if (adapter.base_model_dir().empty())
    throw UserError(adapter_dir + "/" + kPeftConfigFile + ": base_model_name_or_path \"" + adapter.base_model_name() +
                    "\" is not a model directory (as given, or relative to the adapter): it is needed for --merge");
  const HfModelDir base(adapter.base_model_dir());
  const LoraTargets targets = resolve_lora_targets(base.config(), adapter.lora());
  adapter.check_weights(base.config(), targets);
  const ModelConfig config = lora_merged_config(base.config(), adapter.lora());
  const ParallelDims dims = ParallelDims{}.resolved(mpi.world_size()).for_model(
      static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
  const Topology topology = Topology::discover(mpi, parse_device_request(device));
  const std::unique_ptr<Ops> ops = make_ops(topology);
  ProcessGroups groups(Mesh(dims), mpi.world(), {}, backend_communicators(topology, *ops, mpi.world()).factory);
  ParallelizeOptions options;
  options.data_parallel.sharding = ShardingKind::Zero3;
  const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, options);
  model->load_weights(merged_weights_from_hf_dir(base, adapter.weights(), adapter.lora(), targets, model->tp_layout()));
  const std::string tokenizer =
      std::filesystem::exists(std::filesystem::path(adapter_dir) / "tokenizer.json") ? adapter_dir : adapter.base_model_dir();
  export_hf_model(*model, output_dir, tokenizer, mpi.world_rank() == 0,
                  config.torch_dtype == "bfloat16" ? DType::BF16 : DType::F32);
}

}  // namespace

int run_export_command(const std::vector<std::string>& args, MpiEnvironment& mpi) {
  std::string help;
  const ExportOptions o = parse(args, &help);
  if (o.help) {
    if (mpi.world_rank() == 0) std::printf("%s\n", help.c_str());
    return 0;
  }
  if (is_peft_adapter_dir(o.checkpoint)) {
    if (!o.merge)
      throw UserError("trlhpc export " + o.checkpoint + ": a LoRA adapter directory exports only merged: add --merge");
    export_merged_adapter(o.checkpoint, o.output_dir, o.device, mpi);
    return 0;
  }
  // Pure checks first (every rank reads the same manifest and raises the same error).
  const nlohmann::json manifest = checkpoint::read_manifest(o.checkpoint);
  const ModelConfig config = ModelConfig::from_json(manifest.at("identity").at("model_config"),
                                                    (std::filesystem::path(o.checkpoint) / checkpoint::kManifestFile).string());
  const nlohmann::json& identity = manifest.at("identity");
  ParallelizeOptions options;
  options.data_parallel.sharding = ShardingKind::Zero3;  // each rank reads and holds one shard only
  std::string base_model;  // a LoRA run's base (the checkpoint holds only its adapters)
  if (identity.contains("lora")) {
    options.lora = lora_from_identity(identity.at("lora"));
    base_model = manifest.value("run", nlohmann::json::object()).value("base_model", "");
    (void)resolve_lora_targets(config, *options.lora);
  } else if (o.merge) {
    throw UserError("trlhpc export " + o.checkpoint + " --merge: the checkpoint is of a full fine-tuning run (no LoRA "
                    "adapter to merge): drop --merge");
  }
  const ParallelDims dims = ParallelDims{}.resolved(mpi.world_size()).for_model(
      static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
  const Topology topology = Topology::discover(mpi, parse_device_request(o.device));
  const std::unique_ptr<Ops> ops = make_ops(topology);
  {
    ProcessGroups groups(Mesh(dims), mpi.world(), {}, backend_communicators(topology, *ops, mpi.world()).factory);
    const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, options);
    checkpoint::load_checkpoint_parameters(o.checkpoint, manifest, *model);
    // The checkpoint carries the run's tokenizer files (commit.hpp): the export is self-contained.
    const bool writer = mpi.world_rank() == 0;
    if (!model->has_adapters()) export_hf_model(*model, o.output_dir, o.checkpoint, writer);
    else export_peft_adapter(*model, o.merge ? adapter_staging(o.output_dir) : o.output_dir, o.checkpoint, writer, base_model);
  }
  if (o.merge) {  // the adapter just written, merged into its base
    // export_hf_model agrees on its outcome over every rank: the staged adapter is read by all by then.
    export_merged_adapter(adapter_staging(o.output_dir), o.output_dir, o.device, mpi);
    if (mpi.world_rank() == 0) std::filesystem::remove_all(adapter_staging(o.output_dir));
  }
  if (mpi.world_rank() == 0)
    std::printf("exported %s (step %lld) to %s\n", o.checkpoint.c_str(),
                static_cast<long long>(manifest.value("step", int64_t{0})), o.output_dir.c_str());
  return 0;
}

}  // namespace trlhpc
