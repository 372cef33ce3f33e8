// Preemption signals: a PreemptionWatch turns SIGTERM/SIGUSR1 into a flag, and once the job is over
// (ignore_preemption_signals_from_now) a late signal is ignored instead of killing the rank with the
// default action. The soak (tests/soak/soak.sh) found that: a SIGUSR1 landing while a rank waited in
// MPI_Finalize made mpirun exit 138 after a run that had saved its model.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "trlhpc/train/preemption.hpp"

namespace trlhpc {
namespace {

// Runs `body` in a child process; its exit status as waitpid reports it.
template <class Fn>
int status_of_child(Fn&& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(PreemptionSignals, AWatchTurnsTheSignalIntoAFlag) {
  const int status = status_of_child([] {
    const PreemptionWatch watch;
    raise(SIGUSR1);
    _exit(watch.local_signal() == SIGUSR1 ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(PreemptionSignals, AfterTheJobALateSignalIsIgnored) {
  for (const int signal_number : {SIGUSR1, SIGTERM}) {
    const int status = status_of_child([signal_number] {
      { const PreemptionWatch watch; }  // the job ran and ended
      ignore_preemption_signals_from_now();
      raise(signal_number);  // the scheduler's signal arrives while the rank finalizes
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << signal_name(signal_number) << ": " << (WIFSIGNALED(status) ? "killed by the signal" : "exit code");
  }
  // Without it, the default action kills (what the soak saw).
  const int status = status_of_child([] {
    { const PreemptionWatch watch; }
    raise(SIGUSR1);
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR1);
}

}  // namespace
}  // namespace trlhpc
