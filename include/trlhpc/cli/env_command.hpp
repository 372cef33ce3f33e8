#pragma once
// `trlhpc env`: what this launch looks like, like `accelerate env`: trlhpc and library versions, hosts,
// ranks, devices and CPU threads, and -- for the parallel sizes given as flags -- the mesh and every
// rank's group members. Rank 0 prints (everything is gathered to it); --json prints one JSON object.
//
// Flags: --dp_replicate_size --dp_shard_size (-1: the rest) --tp_size --cp_size --sp_size
//        --device auto|cpu|cuda --json --help
#include <iosfwd>

namespace trlhpc {

class MpiEnvironment;

// argv[0] is the command name ("env"), the rest its flags. Collective over every rank of the job. Returns the
// exit code (0). Bad flags, bad sizes or an impossible device binding throw UserError, identically on
// every rank and before any rank could wait for another.
int run_env_command(int argc, char** argv, MpiEnvironment& mpi);
// Same, printing (on rank 0) to `out` instead of std::cout.
int run_env_command(int argc, char** argv, MpiEnvironment& mpi, std::ostream& out);

}  // namespace trlhpc
