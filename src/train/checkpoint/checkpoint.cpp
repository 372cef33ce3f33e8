#include "trlhpc/train/checkpoint/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/io/file_region_writer.hpp"
#include "trlhpc/io/hdf5/hdf5_preallocated_file.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/comm/root_action.hpp"
#include "trlhpc/train/checkpoint/commit.hpp"
#include "trlhpc/train/checkpoint/disk_space.hpp"
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

// `index`: state_index_json's {"datasets", "tensors"}.
nlohmann::json manifest_of(const SaveRequest& request, const nlohmann::json& index, int64_t optimizer_step) {
  const TrainingProgress& p = request.progress;
  nlohmann::json manifest = {{"format", "trlhpc-checkpoint"},
          {"format_version", kFormatVersion},
          {"step", p.step},
          {"epoch", p.epoch},
          {"num_tokens", p.num_tokens},
          {"sampler", {{"epoch", p.sampler_epoch}, {"step", p.sampler_step}}},
          {"optimizer_step", optimizer_step},
          {"identity", request.identity},
          {"run", request.run},
          {"state_file", kStateFile},
          {"datasets", index["datasets"]},
          {"tensors", index["tensors"]}};
  // Only runs that select a best model record it: every other manifest stays as it was.
  if (!request.best_model.is_null()) manifest["best_model"] = request.best_model;
  if (request.model_only) {  // what only a resume would read is not there
    manifest.erase("sampler");
    manifest.erase("optimizer_step");
    manifest["save_only_model"] = true;
  }
  return manifest;
}

}  // namespace

namespace {

// A failed write (a full disk, an I/O error) on any rank: every rank learns it, the .tmp folder is
// removed to give the space back, and nothing earlier was touched. Rank 0 tells a full disk (its file
// system has less room than the checkpoint needs, counting the partial folder) from other failures, so
// every rank says the same; other failures carry one text everywhere (the lowest failing rank's error,
// agree_on_writes, or run_on_root's), after a first line saying which step.
[[noreturn]] void abandon_save(Communicator& comm, const SaveRequest& request, const std::string& tmp,
                               int64_t need_bytes, const std::string& local_error) {
  std::string verdict;
  run_on_root(comm, [&] {
    verdict = disk_full_verdict(tmp, request.output_dir, request.progress.step, need_bytes);
    std::error_code ec;
    fs::remove_all(tmp, ec);
  });
  broadcast_text(comm, verdict);
  if (!verdict.empty()) throw RuntimeFailure(verdict);
  throw RuntimeFailure("saving the checkpoint of step " + std::to_string(request.progress.step) +
                       " into " + tmp + " failed" + (local_error.empty() ? " on another rank" : ": " + local_error) +
                       ". The earlier checkpoints and the output directory are untouched; fix the cause (a "
                       "failing disk says EIO, a full one ENOSPC) and resume with --resume_from_checkpoint latest");
}

// The bytes this checkpoint will take (disk_space.hpp): its datasets' data, and the manifest as it will
// be written (checksums are fixed-width, so placeholders give its size).
int64_t bytes_needed(const SaveRequest& request, const StateLayout& layout, int64_t optimizer_step) {
  int64_t data_bytes = 0;
  for (const StatePart& part : layout.parts) data_bytes += 4 * part.length;
  const StateChecksums placeholders(kStateKinds.size() * layout.tensors.size(), std::string(32, '0'));
  const nlohmann::json index = state_index_json(layout, placeholders);
  const int64_t manifest_bytes = static_cast<int64_t>(manifest_of(request, index, optimizer_step).dump(1).size()) + 1;
  return checkpoint_bytes_estimate(data_bytes, static_cast<int64_t>(layout.parts.size()), manifest_bytes,
                                   request.tokenizer_dir);
}

}  // namespace

namespace {

// The whole state.h5 is laid out before any rank writes, so the manifest's length must be known before
// its checksums are: they are fixed-width text, so placeholders give it.
int64_t embedded_manifest_bytes(const SaveRequest& request, const StateLayout& layout, int64_t optimizer_step) {
  const StateChecksums placeholders(kStateKinds.size() * layout.tensors.size(), std::string(32, '0'));
  return static_cast<int64_t>(manifest_of(request, state_index_json(layout, placeholders), optimizer_step).dump().size());
}

// Opens the state file rank 0 laid out. Missing here although rank 0 created it: this node does not see
// rank 0's --output_dir.
FileRegionWriter open_state_file(const std::string& path, const SaveRequest& request) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw RuntimeFailure(path + ", which rank 0 has just created, does not exist on " + process_identity().host +
                         ": --output_dir (" + request.output_dir + ") must be a folder that every node shares "
                         "(a parallel or network file system), not a node-local disk");
  return FileRegionWriter(path);
}

// One all-reduce: whether any rank failed, and the sum of every rank's checksums. On a failure every
// rank learns the lowest failing rank's error (its text, the same everywhere) and returns it.
std::string agree_on_writes(Communicator& comm, const std::string& local_error, std::vector<int64_t>& sums) {
  std::vector<int64_t> values(1 + sums.size());
  values[0] = local_error.empty() ? 0 : 1;
  std::copy(sums.begin(), sums.end(), values.begin() + 1);
  comm.all_reduce(std::span<int64_t>(values));
  std::copy(values.begin() + 1, values.end(), sums.begin());
  if (values[0] == 0) return "";
  int32_t first = local_error.empty() ? comm.size() : comm.rank();  // failure path only: two more collectives
  comm.all_reduce(std::span<int32_t>(&first, 1), ReduceOp::Min);
  std::string error = local_error;
  broadcast_text(comm, error, first);
  return error;
}

}  // namespace

std::string write_checkpoint(const SaveRequest& request, ProcessGroup& group, const StateLayout& layout,
                             const StateSource& source, int64_t optimizer_step) {
  Communicator& comm = group.host();
  const std::string tmp = checkpoint_dir(request.output_dir, request.progress.step) + ".tmp";  // every rank's path
  const std::string state_path = (fs::path(tmp) / kStateFile).string();
  const int64_t need_bytes = bytes_needed(request, layout, optimizer_step);
  const int64_t manifest_bytes = embedded_manifest_bytes(request, layout, optimizer_step);
  const std::vector<Hdf5PlannedDataset> datasets = state_file_datasets(layout, manifest_bytes);
  // Rank 0: the folder, room for the whole checkpoint (a full disk is refused here, on every rank), then
  // state.h5 with every dataset laid out by serial HDF5. One broadcast brings the outcome and the
  // datasets' offsets to every rank. No MPI-IO: opening and closing one file through it cost ~20
  // collective round trips, which across nodes made a save 7x slower than on one node.
  const std::vector<int64_t> offsets = run_on_root(comm, datasets.size(), [&] {
    begin_save(request.output_dir, request.progress.step);
    try {
      reserve_space(tmp, request.output_dir, request.progress.step, need_bytes);
      release_space(tmp);  // the room is there: state.h5 takes it next
      return create_preallocated_hdf5(state_path, datasets);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
  });
  // Every rank writes its share of the data straight into the file (pwrite), fsyncs and closes it:
  // local I/O, no collective, so a failure here cannot leave ranks waiting on one another.
  std::vector<int64_t> sums(2 * kStateKinds.size() * layout.tensors.size(), 0);
  std::string error;
  try {
    FileRegionWriter file = open_state_file(state_path, request);
    write_state(file, offsets, layout, source, sums);
    file.finish();
  } catch (const std::exception& e) {
    error = "rank " + std::to_string(comm.rank()) + " (" + process_identity().host + "): " + e.what();
  }
  error = agree_on_writes(comm, error, sums);
  if (!error.empty()) abandon_save(comm, request, tmp, need_bytes, error);
  const nlohmann::json manifest =
      manifest_of(request, state_index_json(layout, state_checksums(layout, sums)), optimizer_step);
  try {
    run_on_root(comm, [&] {
      // The manifest's copy inside state.h5, then the commit (commit.hpp: fsync, rename, latest).
      const std::string text = manifest.dump();
      TRLHPC_ASSERT(static_cast<int64_t>(text.size()) == manifest_bytes, "the manifest's length changed with its checksums");
      FileRegionWriter file(state_path);
      file.write(offsets.back(), text.data(), text.size());
      file.finish();
      commit_save(request.output_dir, request.progress.step, manifest, request.tokenizer_dir, request.save_total_limit,
                  request.keep_step);
    });
  } catch (const std::exception& e) {
    abandon_save(comm, request, tmp, need_bytes, e.what());
  }
  return checkpoint_dir(request.output_dir, request.progress.step);
}

std::string save_checkpoint(const SaveRequest& request, Trainer& trainer) {
  ParallelModel& model = trainer.model();
  const StateLayout layout = state_layout(model, trainer.optimizer(), request.model_only);
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

// Before parallel HDF5 sees the file (its open of a non-HDF5 or truncated file fails with a RuntimeFailure,
// exit 2, "fix the machine", and a screen of HDF5-DIAG): a missing file, a file that does not start with
// the HDF5 signature (trlhpc writes no user block) or one shorter than the data the manifest declares is
// bad input, exit 1, naming the file. Local reads only, on every rank: the same verdict everywhere, before
// any collective. A corrupted byte inside the data is caught by the checksums as the datasets are read.
void require_state_file(const std::string& dir, const nlohmann::json& datasets) {
  const std::string path = (fs::path(dir) / kStateFile).string();
  const std::string advice = ": resume from an earlier checkpoint (--resume_from_checkpoint " +
                             (fs::path(dir).parent_path() / "checkpoint-N").string() + ") or start afresh";
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw UserError("checkpoint state " + path + " cannot be read (" + ec.message() + ")" + advice);
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  unsigned char head[8] = {};
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    const size_t got = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (got != sizeof head || std::memcmp(head, kSignature, sizeof head) != 0)
      throw UserError("checkpoint state " + path + " is not an HDF5 file (no HDF5 signature at its start)" + advice);
  } else {
    throw UserError("checkpoint state " + path + " cannot be opened for reading" + advice);
  }
  uintmax_t data_bytes = 0;  // fp32 elements of every dataset the manifest lists
  for (const auto& [name, entry] : datasets.items()) {
    uintmax_t elements = 1;
    if (entry.is_object() && entry.contains("shape") && entry["shape"].is_array())
      for (const auto& d : entry["shape"]) elements *= d.is_number_unsigned() ? d.get<uintmax_t>() : 0;
    data_bytes += 4 * elements;
  }
  if (size < data_bytes)
    throw UserError("checkpoint state " + path + " is truncated: " + std::to_string(size) + " bytes, but the datasets " +
                    "its manifest lists need at least " + std::to_string(data_bytes) + advice);
}
}  // namespace

namespace {
// manifest.json against the manifest state.h5 was written with (every rank reads it: the same verdict
// everywhere). A file without that copy, or with one that is not JSON, is damaged.
void require_embedded_manifest(const std::string& dir, const nlohmann::json& manifest, ParallelHdf5File& file) {
  const char* name = kEmbeddedManifest;
  if (!file.has_dataset(name))
    throw UserError("checkpoint " + file.path() + " holds no copy of its manifest (dataset " + name +
                    "): it was not written by trlhpc or is damaged; resume from another checkpoint");
  std::string text = file.read_text(name);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  // Untrusted like manifest.json: nesting bounded as read_manifest bounds it.
  bool too_deep = false;
  const nlohmann::json::parser_callback_t shallow = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxManifestNesting) too_deep = true;
    return !too_deep;
  };
  const nlohmann::json embedded = nlohmann::json::parse(text, shallow, /*allow_exceptions=*/false);
  if (embedded.is_discarded() || too_deep)
    throw UserError("checkpoint " + file.path() + ": its copy of the manifest (dataset " + name +
                    ") is not JSON: the file is damaged; resume from another checkpoint");
  require_same_manifest(dir, manifest, embedded);
}
}  // namespace

void require_resumable(const std::string& dir, const nlohmann::json& manifest) {
  if (!(manifest.contains("save_only_model") && manifest["save_only_model"] == true)) return;
  throw UserError("--resume_from_checkpoint " + dir + ": saved with --save_only_model true, it holds the model only "
                  "(no AdamW moments, optimizer step count or data position), so training cannot go on from it as it "
                  "would have (transformers would restart the optimizer silently). Resume from a checkpoint saved "
                  "without --save_only_model, or start a new run from its weights (trlhpc export " + dir +
                  " --output_dir OUT, then --model_name_or_path OUT)");
}

nlohmann::json open_manifest(const std::string& dir, const nlohmann::json& identity) {
  nlohmann::json manifest = read_manifest(dir);
  require_same_identity(dir, manifest.value("identity", nlohmann::json::object()), identity);
  return manifest;
}

TrainingProgress load_checkpoint(const std::string& dir, const nlohmann::json& manifest, Trainer& trainer) {
  require_resumable(dir, manifest);
  ParallelModel& model = trainer.model();
  const nlohmann::json& datasets = manifest_datasets(dir, manifest);
  const StateIndex index = StateIndex::from_manifest(dir, manifest);
  require_state_file(dir, datasets);
  ParallelHdf5File file = ParallelHdf5File::open((fs::path(dir) / kStateFile).string(), model.groups().world());
  require_embedded_manifest(dir, manifest, file);
  read_parameters(file, model, index);
  read_optimizer_state(file, model, trainer.optimizer(), index);
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
  const nlohmann::json& datasets = manifest_datasets(dir, manifest);
  const StateIndex index = StateIndex::from_manifest(dir, manifest);
  require_state_file(dir, datasets);
  ParallelHdf5File file = ParallelHdf5File::open((fs::path(dir) / kStateFile).string(), model.groups().world());
  read_parameters(file, model, index);
  file.close();
}

}  // namespace trlhpc::checkpoint
