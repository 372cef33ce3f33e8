#pragma once
// The checkpoint folder and its manifest (docs/CONTRACT.md "Files"):
//
//   OUTPUT_DIR/checkpoint-STEP/state.h5        parallel HDF5: params/unit-U, exp_avg/unit-U,
//                                              exp_avg_sq/unit-U (format 2: a unit's tensors in global
//                                              shapes one after another; format 1: params/NAME ... per
//                                              tensor; state_index.hpp), the manifest as the byte
//                                              dataset "trlhpc_manifest" (an attribute would be
//                                              limited to 64 KiB)
//   OUTPUT_DIR/checkpoint-STEP/manifest.json   written LAST: a folder without it is not a checkpoint
//   OUTPUT_DIR/checkpoint-STEP/tokenizer files copied from the run's tokenizer (export needs them)
//   OUTPUT_DIR/latest                          "checkpoint-STEP" of the newest committed one
//
// The manifest holds what resuming needs besides the tensors (step, sampler position, tokens seen,
// optimizer step, lr schedule), what must match to resume (model config, tokenizer fingerprint,
// dataset, global batch), the mesh and options the run used, the datasets of state.h5 and the index
// of where each tensor lies in them, with one checksum per kind and tensor (state_index.hpp).
// Everything here is pure file reading: every rank reads the same files and raises the same UserError.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trlhpc::checkpoint {

// 2: a dataset per unit and kind with an index ("tensors"); 1: a dataset per tensor and kind (read only).
inline constexpr int kFormatVersion = 2;
inline constexpr const char* kStateFile = "state.h5";
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kLatestFile = "latest";
// The dataset of state.h5 holding a copy of the manifest (checked against manifest.json on resume).
inline constexpr const char* kEmbeddedManifest = "trlhpc_manifest";
// A manifest.json nesting deeper than this is refused as damaged (trlhpc writes 4 levels).
inline constexpr int kMaxManifestNesting = 32;

// "OUTPUT_DIR/checkpoint-STEP"
std::string checkpoint_dir(const std::string& output_dir, int64_t step);

// Committed checkpoints of output_dir (a manifest.json present), ascending by step; .tmp folders of
// interrupted saves are not among them.
std::vector<std::pair<int64_t, std::string>> committed_checkpoints(const std::string& output_dir);

// --resume_from_checkpoint: "latest" (the newest committed checkpoint of output_dir) or a folder;
// UserError when there is none, or the folder does not exist. "auto" (for job scripts that requeue):
// the newest committed checkpoint, or "" when output_dir holds none (a fresh start).
std::string resolve_checkpoint(const std::string& request, const std::string& output_dir);

// The manifest of committed checkpoint `dir`; UserError naming the folder when it is missing, not
// JSON, of another format, of a newer format version than this build reads, or holding a field that
// resuming reads with the wrong type (step, epoch, sampler, datasets, identity).
nlohmann::json read_manifest(const std::string& dir);

// UserError naming the first difference when `saved` (a manifest's "identity") does not match
// `current`: the model (parameter names and shapes, config), the tokenizer, the dataset, the global
// batch. Keys: parameters, model_config, tokenizer_fingerprint, dataset, global_batch_size; a key
// `current` lacks is not compared (the job checks the model and tokenizer before loading any data,
// the dataset after).
void require_same_identity(const std::string& dir, const nlohmann::json& saved, const nlohmann::json& current);

// UserError naming the first difference when a checkpoint's manifest.json (`manifest_file`) is not the
// manifest embedded in its state.h5 when it was written (`embedded`): an edited step, sampler position
// or identity would otherwise be believed while the tensors are another step's.
void require_same_manifest(const std::string& dir, const nlohmann::json& manifest_file, const nlohmann::json& embedded);

// FNV-1a 64 over the tokenizer files of `dir` (hf_tokenizer_file_names, names and bytes); "" when
// none is present.
std::string tokenizer_fingerprint(const std::string& dir);

}  // namespace trlhpc::checkpoint
