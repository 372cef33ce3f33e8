#pragma once
// The rule for an --output_dir that already holds a run (issue 30, item 4), after transformers'
// examples (get_last_checkpoint + "Output directory already exists and is not empty. Use
// --overwrite_output_dir to overcome"):
//
//   - a fresh run (no --resume_from_checkpoint) into a folder holding an earlier run's files
//     (checkpoint-* folders, `latest`, metrics.jsonl, model.safetensors) is refused with a UserError
//     that lists them and names the ways on: --resume_from_checkpoint latest, another --output_dir, or
//     --overwrite_output_dir;
//   - with --overwrite_output_dir those files are removed by global rank 0 before the run writes
//     anything, and the log lists what was removed (nothing is replaced silently);
//   - --resume_from_checkpoint latest|auto|DIR continues the run the folder holds (its metrics.jsonl
//     is cut back to the checkpoint's step).
// The dataset cache (.dataset_cache) and TensorBoard runs/ are kept: they are reusable, not results.
#include <string>
#include <vector>

namespace trlhpc {

// The earlier run's files directly under `output_dir` (names, sorted); empty when none or no folder.
std::vector<std::string> earlier_run_files(const std::string& output_dir);

// UserError naming the folder and what it holds, unless `files` is empty or `overwrite`.
void require_fresh_output_dir(const std::string& output_dir, const std::vector<std::string>& files, bool overwrite);

// Removes `files` under `output_dir` (rank 0 only). RuntimeFailure naming the one that resisted.
void remove_earlier_run(const std::string& output_dir, const std::vector<std::string>& files);

}  // namespace trlhpc
