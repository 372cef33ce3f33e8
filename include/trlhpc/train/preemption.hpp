#pragma once
// Preemption: SIGTERM (the scheduler's stop, scancel) and SIGUSR1 (SLURM's `--signal=USR1@SECONDS`,
// `scancel --signal=USR1`) no longer kill a training rank; they set a flag. The ranks agree on it
// where every rank passes the same point (step boundaries, between evaluation batches, after each
// dataset is loaded): one all-reduce of the signal number, so either every rank stops there or none.
// The job then writes a checkpoint and exits with code 3 (CONTRACT.md); a second signal during the
// save only sets the flag again.
//
// The flag lives in static storage: a signal handler can touch nothing else (async-signal-safety).
// It is the library's one piece of process-wide state, owned by the PreemptionWatch that installed the
// handlers (one at a time) and reset when it goes.
#include <csignal>

namespace trlhpc {

class Communicator;

class PreemptionWatch {
 public:
  PreemptionWatch();   // installs the SIGTERM and SIGUSR1 handlers
  ~PreemptionWatch();  // restores the previous handlers
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // Collective over `comm`: the number of a signal some rank received (the largest), or 0 on every rank.
  int agreed_signal(Communicator& comm) const;
  // This rank's own flag (no communication): the signal it received, or 0.
  int local_signal() const;

 private:
  struct sigaction previous_term_ {}, previous_usr1_ {};
};

// After the job has ended (its model or checkpoint written): SIGTERM and SIGUSR1 are ignored for the
// rest of the process. A scheduler's signal that lands while a rank waits in MPI_Finalize for the
// others has nothing left to stop, and with the default action it killed the rank (mpirun exit 138
// instead of 0; found by tests/soak/soak.sh).
void ignore_preemption_signals_from_now();

// "SIGTERM", "SIGUSR1", or "signal N".
const char* signal_name(int signal_number);

}  // namespace trlhpc
