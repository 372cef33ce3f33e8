#pragma once
// The `trlhpc sft` job: builds the mesh, model, data and trainer from an SftConfig and runs the loop
// (logging, evaluation, final save). Called identically on every rank.
#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

class MpiEnvironment;

// Returns the process exit code (0 on success). Throws UserError / RuntimeFailure.
int run_sft_job(const SftConfig& config, MpiEnvironment& mpi);

}  // namespace trlhpc
