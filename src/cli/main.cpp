// trlhpc: command-line entry point. Dispatches to the sub-commands of CONTRACT.md and turns errors
// into the contract's exit codes: 1 for bad usage or input (UserError, raised identically on every
// rank before any collective, so every rank prints it and exits cleanly), 2 for runtime failures
// (MPI_Abort, so no rank is left waiting in a collective).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "trlhpc/cli/env_command.hpp"
#include "trlhpc/cli/export_command.hpp"
#include "trlhpc/cli/generate_command.hpp"
#include "trlhpc/cli/hub_names.hpp"
#include "trlhpc/cli/plot_command.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/cli/tokenize_command.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hub_cache.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/sft_job.hpp"
#include "trlhpc/train/sft_validation.hpp"

namespace {

constexpr const char* kUsage =
    "usage: trlhpc <command> [options]\n"
    "  sft       fine-tune a model (trlhpc sft --help)\n"
    "  env       versions, ranks, hosts, devices, mesh and groups (trlhpc env --help)\n"
    "  tokenize  the tokens, pieces and loss mask training will see (trlhpc tokenize --help)\n"
    "  export    a checkpoint as a Hugging Face model directory (trlhpc export --help)\n"
    "  generate  continue a prompt or a conversation with a model or checkpoint (trlhpc generate --help)\n"
    "  plot      train/eval loss and learning rate of a metrics.jsonl as a PNG (trlhpc plot --help)\n"
    "  --version print the version\n"
    "Launch with one process, `mpirun -np N trlhpc ...` or `srun trlhpc ...`.\n";

int run_sft(int argc, char** argv, trlhpc::MpiEnvironment& mpi) {
  std::vector<std::string> args(argv + 2, argv + argc);
  trlhpc::SftConfig config;
  std::string help;
  const trlhpc::SftOptionContext context{mpi.world_size(), mpi.world_rank() == 0};
  if (!trlhpc::parse_sft_options(args, config, &help, context)) {
    if (mpi.world_rank() == 0) std::printf("%s", help.c_str());
    return 0;
  }
  // Option values are checked first (as before hub ids existed), so a bad flag is reported before a
  // missing dataset; then hub ids become local cache folders, the one place that reads HF_HUB_CACHE / HF_HOME.
  trlhpc::validate_sft_options(config);
  trlhpc::resolve_hub_names(config, trlhpc::hub::cache_dir_from_environment());
  return trlhpc::run_sft_job(config, mpi);
}

int dispatch(int argc, char** argv, trlhpc::MpiEnvironment& mpi) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "--version" || command == "version") {
    if (mpi.world_rank() == 0) std::printf("trlhpc %s\n", TRLHPC_VERSION);
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    if (mpi.world_rank() == 0) std::printf("%s", kUsage);
    return 0;
  }
  if (command == "sft") return run_sft(argc, argv, mpi);
  if (command == "env") return trlhpc::run_env_command(argc - 1, argv + 1, mpi);
  if (command == "export") return trlhpc::run_export_command(std::vector<std::string>(argv + 2, argv + argc), mpi);
  if (command == "generate")
    return trlhpc::run_generate_command(std::vector<std::string>(argv + 2, argv + argc), mpi);
  if (command == "plot") return trlhpc::run_plot_command(std::vector<std::string>(argv + 2, argv + argc), mpi);
  if (command == "tokenize")
    return trlhpc::run_tokenize_command(std::vector<std::string>(argv + 2, argv + argc), mpi, std::cin, std::cout);
  throw trlhpc::UserError(command.empty() ? std::string("no command given\n") + kUsage
                                          : "unknown command '" + command + "'\n" + kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  trlhpc::MpiEnvironment mpi(&argc, &argv);
  try {
    return dispatch(argc, argv, mpi);
  } catch (const trlhpc::UserError& e) {
    std::fprintf(stderr, "trlhpc: error: %s\n", e.what());
    std::fflush(stderr);
    return 1;
  } catch (const std::exception& e) {
    // Most runtime failures already start with the rank prefix: print it once.
    const std::string prefix = trlhpc::rank_prefix(), what = e.what();
    std::fprintf(stderr, "trlhpc: failure: %s%s\n", what.rfind(prefix, 0) == 0 ? "" : prefix.c_str(), what.c_str());
    std::fflush(stderr);
    mpi.abort(2);
  }
}
