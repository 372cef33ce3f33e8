#include "trlhpc/train/checkpoint/checkpoint.hpp"

#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/parallel/parallel_hdf5.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/parallel/root_action.hpp"
#include "trlhpc/train/checkpoint/commit.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/checkpoint/state.hpp"

namespace trlhpc::checkpoint {
namespace fs = std::filesystem;

nlohmann::json model_identity(const ModelConfig& config) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const ParameterSpec& spec : parameter_specs(config)) parameters.push_back({spec.name, spec.shape});
  return {{"parameters", parameters}, {"model_config", config.to_json()}};
}

namespace {

nlohmann::json manifest_of(const SaveRequest& request, const nlohmann::json& datasets, int64_t optimizer_step) {
  const TrainingProgress& p = request.progress;
  return {{"format", "trlhpc-checkpoint"},
          {"format_version", kFormatVersion},
          {"step", p.step},
          {"epoch", p.epoch},
          {"num_tokens", p.num_tokens},
          {"sampler", {{"epoch", p.sampler_epoch}, {"step", p.sampler_step}}},
          {"optimizer_step", optimizer_step},
          {"identity", request.identity},
          {"run", request.run},
          {"state_file", kStateFile},
          {"datasets", datasets}};
}

}  // namespace

namespace {

// A failed write (a full disk, an I/O error) on any rank: every rank learns it (the failing rank's
// text is not shared: each rank names its own, the first line says which step), the .tmp folder is
// removed to give the space back, and nothing earlier was touched.
[[noreturn]] void abandon_save(Communicator& comm, const SaveRequest& request, const std::string& tmp,
                               const std::string& local_error) {
  run_on_root(comm, [&] {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  });
  throw RuntimeFailure("saving the checkpoint of step " + std::to_string(request.progress.step) +
                       " into " + tmp + " failed" + (local_error.empty() ? " on another rank" : ": " + local_error) +
                       ". The disk may be full (ENOSPC) or failing (EIO); the earlier checkpoints and the output "
                       "directory are untouched. Free space and resume with --resume_from_checkpoint latest");
}

}  // namespace

std::string write_checkpoint(const SaveRequest& request, ProcessGroup& group, const StateLayout& layout,
                             const StateSource& source, int64_t optimizer_step) {
  Communicator& comm = group.comm();
  run_on_root(comm, [&] { begin_save(request.output_dir, request.progress.step); });
  const std::string tmp = checkpoint_dir(request.output_dir, request.progress.step) + ".tmp";  // every rank's path
  std::string error;
  nlohmann::json manifest;
  try {
    ParallelHdf5File file = ParallelHdf5File::create((fs::path(tmp) / kStateFile).string(), group);
    const nlohmann::json datasets = write_state(file, comm, layout, source);
    manifest = manifest_of(request, datasets, optimizer_step);
    file.write_text("trlhpc_manifest", manifest.dump());
    file.close();
  } catch (const std::exception& e) {
    error = e.what();
  }
  int32_t failed = error.empty() ? 0 : 1;
  comm.all_reduce(std::span<int32_t>(&failed, 1), ReduceOp::Max);
  if (failed) abandon_save(comm, request, tmp, error);
  try {
    run_on_root(comm, [&] {
      commit_save(request.output_dir, request.progress.step, manifest, request.tokenizer_dir, request.save_total_limit);
    });
  } catch (const std::exception& e) {
    abandon_save(comm, request, tmp, e.what());
  }
  return checkpoint_dir(request.output_dir, request.progress.step);
}

std::string save_checkpoint(const SaveRequest& request, Trainer& trainer) {
  ParallelModel& model = trainer.model();
  const StateLayout layout = state_layout(model, trainer.optimizer());
  // One unit's host copy at a time: the sources are asked for in ascending order.
  int held = -1;
  HostValues host;
  const StateSource source = [&](int s) -> std::span<const float> {
    if (s != held) {
      host = copy_source(model, trainer.optimizer(), layout, s);
      held = s;
    }
    return host.span();
  };
  return write_checkpoint(request, model.groups().world(), layout, source, trainer.optimizer().step_count());
}

namespace {
const nlohmann::json& manifest_datasets(const std::string& dir, const nlohmann::json& manifest) {
  if (!manifest.contains("datasets"))
    throw UserError("checkpoint " + dir + ": " + kManifestFile + " lists no datasets; the manifest is damaged");
  return manifest["datasets"];
}
}  // namespace

nlohmann::json open_manifest(const std::string& dir, const nlohmann::json& identity) {
  nlohmann::json manifest = read_manifest(dir);
  require_same_identity(dir, manifest.value("identity", nlohmann::json::object()), identity);
  return manifest;
}

TrainingProgress load_checkpoint(const std::string& dir, const nlohmann::json& manifest, Trainer& trainer) {
  ParallelModel& model = trainer.model();
  ParallelHdf5File file = ParallelHdf5File::open((fs::path(dir) / kStateFile).string(), model.groups().world());
  const nlohmann::json& datasets = manifest_datasets(dir, manifest);
  read_parameters(file, model, datasets);
  read_optimizer_state(file, model, trainer.optimizer(), datasets);
  file.close();
  trainer.optimizer().set_step_count(manifest.value("optimizer_step", int64_t{0}));
  TrainingProgress p;
  p.step = manifest.value("step", int64_t{0});
  p.num_tokens = manifest.value("num_tokens", int64_t{0});
  p.epoch = manifest.value("epoch", 0.0);
  const nlohmann::json sampler = manifest.value("sampler", nlohmann::json::object());
  p.sampler_epoch = sampler.value("epoch", int64_t{0});
  p.sampler_step = sampler.value("step", int64_t{0});
  return p;
}

void load_checkpoint_parameters(const std::string& dir, const nlohmann::json& manifest, ParallelModel& model) {
  ParallelHdf5File file = ParallelHdf5File::open((fs::path(dir) / kStateFile).string(), model.groups().world());
  read_parameters(file, model, manifest_datasets(dir, manifest));
  file.close();
}

}  // namespace trlhpc::checkpoint
