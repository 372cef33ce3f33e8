#pragma once
// `trlhpc export CHECKPOINT --output_dir DIR`: the Hugging Face model directory (config.json,
// model.safetensors, the tokenizer files the checkpoint carries) of a checkpoint's weights, on any
// number of ranks (one is enough; more split the reading: each rank reads one ZeRO-3 shard, rank 0
// writes). The checksums of the weights are verified on the way.
#include <string>
#include <vector>

namespace trlhpc {

class MpiEnvironment;

// args: the flags after "export". Returns the exit code; UserError for bad flags or checkpoints.
int run_export_command(const std::vector<std::string>& args, MpiEnvironment& mpi);

}  // namespace trlhpc
