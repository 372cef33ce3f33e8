#pragma once
// The file-system side of saving a checkpoint, run by one rank (run_on_root), in an order that keeps
// every earlier checkpoint intact and `latest` pointing at a complete one whatever rank dies when:
//   1. begin_save     empties and creates OUTPUT_DIR/checkpoint-STEP.tmp (every rank then writes
//                     state.h5 into it, collectively)
//   2. commit_save    fsyncs state.h5, copies the tokenizer files, writes manifest.json and fsyncs it
//                     and the folder, renames .tmp -> checkpoint-STEP, fsyncs OUTPUT_DIR, replaces
//                     `latest` (write latest.tmp, fsync, rename), then deletes the oldest committed
//                     checkpoints beyond save_total_limit (never the new one).
// A crash before the rename leaves a .tmp folder, which committed_checkpoints ignores and the next
// save of that step replaces.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trlhpc::checkpoint {

// Returns the .tmp folder to write into.
std::string begin_save(const std::string& output_dir, int64_t step);

// Returns the committed folder. save_total_limit <= 0 keeps every checkpoint; otherwise the oldest go
// first, never the newest nor `keep_step` (the best model's, -1: none), as transformers' rotate_checkpoints.
std::string commit_save(const std::string& output_dir, int64_t step, const nlohmann::json& manifest,
                        const std::string& tokenizer_dir, int64_t save_total_limit, int64_t keep_step = -1);

// The end of a run under save_total_limit 1 with a best checkpoint, as transformers' Trainer ends one
// ("Delete the last checkpoint when save_total_limit=1"): every committed checkpoint but `keep_step`'s
// goes, the newest included, after `latest` has been pointed at the one kept (so it never names a
// deleted folder). Nothing happens when `keep_step` has no committed checkpoint. Returns the deleted
// folders, oldest first. Run by one rank, after every rank has finished reading checkpoints.
std::vector<std::string> keep_only_checkpoint(const std::string& output_dir, int64_t keep_step);

}  // namespace trlhpc::checkpoint
