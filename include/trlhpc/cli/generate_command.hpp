#pragma once
// `trlhpc generate MODEL [--prompt TEXT | --messages JSON] [decoding flags]` (CONTRACT.md): loads a
// Hugging Face model directory or a trlhpc checkpoint folder, renders the chat template, decodes with
// a KV cache (generate/generator.hpp) on one rank or tensor-parallel over the ranks of `mpirun`, and
// prints the continuation on rank 0.
#include <string>
#include <vector>

namespace trlhpc {

class MpiEnvironment;

int run_generate_command(const std::vector<std::string>& args, MpiEnvironment& mpi);

}  // namespace trlhpc
