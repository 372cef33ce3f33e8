#include "trlhpc/cli/export_command.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/parallel/backend_communicators.hpp"
#include "trlhpc/parallel/process_groups.hpp"
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
};

ExportOptions parse(const std::vector<std::string>& args, std::string* help) {
  namespace po = boost::program_options;
  ExportOptions o;
  po::options_description desc("usage: trlhpc export CHECKPOINT --output_dir DIR");
  desc.add_options()("help,h", po::bool_switch(&o.help), "print this help")(
      "checkpoint", po::value<std::string>(&o.checkpoint), "a checkpoint-STEP folder (or give it first, unnamed)")(
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

}  // namespace

int run_export_command(const std::vector<std::string>& args, MpiEnvironment& mpi) {
  std::string help;
  const ExportOptions o = parse(args, &help);
  if (o.help) {
    if (mpi.world_rank() == 0) std::printf("%s\n", help.c_str());
    return 0;
  }
  // Pure checks first (every rank reads the same manifest and raises the same error).
  const nlohmann::json manifest = checkpoint::read_manifest(o.checkpoint);
  const ModelConfig config = ModelConfig::from_json(manifest.at("identity").at("model_config"),
                                                    (std::filesystem::path(o.checkpoint) / checkpoint::kManifestFile).string());
  const ParallelDims dims = ParallelDims{}.resolved(mpi.world_size()).for_model(
      static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
  const Topology topology = Topology::discover(mpi, parse_device_request(o.device));
  const std::unique_ptr<Ops> ops = make_ops(topology);
  ProcessGroups groups(Mesh(dims), mpi.world(), {}, backend_communicators(topology, *ops, mpi.world()).factory);
  ParallelizeOptions options;
  options.data_parallel.sharding = ShardingKind::Zero3;  // each rank reads and holds one shard only
  const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, options);
  checkpoint::load_checkpoint_parameters(o.checkpoint, manifest, *model);
  // The checkpoint carries the run's tokenizer files (commit.hpp): the export is self-contained.
  export_hf_model(*model, o.output_dir, o.checkpoint, mpi.world_rank() == 0);
  if (mpi.world_rank() == 0)
    std::printf("exported %s (step %lld) to %s\n", o.checkpoint.c_str(),
                static_cast<long long>(manifest.value("step", int64_t{0})), o.output_dir.c_str());
  return 0;
}

}  // namespace trlhpc
