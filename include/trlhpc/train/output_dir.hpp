#pragma once
// The rule for an --output_dir that already holds a run (issue 30, item 4), after transformers'
// examples (get_last_checkpoint + "Output directory already exists and is not empty. Use
// --overwrite_output_dir to overcome"):
//
//   - a fresh run (no --resume_from_checkpoint) into a folder holding an earlier run's checkpoints
//     (checkpoint-* folders, `latest`) is refused with a UserError that lists them and names the ways
//     on: --resume_from_checkpoint latest, another --output_dir, or --overwrite_output_dir (its
//     checkpoint-N would replace theirs and `latest` would mix the two runs);
//   - with --overwrite_output_dir those checkpoints, metrics.jsonl and model.safetensors are removed by
//     global rank 0 before the run writes anything, and the log lists them;
//   - a folder with an earlier run's metrics.jsonl but no checkpoint (a finished run without
//     --save_steps, or a re-run over the dataset cache): the fresh run starts its own metrics.jsonl; the
//     old one is kept as metrics.jsonl.old and the log says so (lines of two runs never interleave);
//   - a checkpoint-N.tmp folder (a save that did not finish: the job died writing it) is no checkpoint;
//     a fresh run removes it and says so, so `--resume_from_checkpoint auto` after a job killed in its
//     first save starts afresh instead of being refused;
//   - --resume_from_checkpoint latest|auto|DIR continues the run the folder holds (its metrics.jsonl
//     is cut back to the checkpoint's step).
// The dataset cache (.dataset_cache) and TensorBoard runs/ are kept: they are reusable, not results.
#include <string>
#include <vector>

namespace trlhpc {

// The earlier run's files directly under `output_dir` (names, sorted: checkpoint-*, latest,
// metrics.jsonl, model.safetensors); empty when none or no folder.
std::vector<std::string> earlier_run_files(const std::string& output_dir);

// Rank 0, before a fresh run writes anything: applies the rule above. Returns the log lines to print
// (what was removed or kept aside); UserError naming the folder and its checkpoints when refused.
std::vector<std::string> prepare_fresh_output_dir(const std::string& output_dir, bool overwrite);

}  // namespace trlhpc
