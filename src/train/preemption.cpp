#include "trlhpc/train/preemption.hpp"

#include <cstdint>
#include <span>

#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {
namespace {

volatile std::sig_atomic_t received_signal = 0;  // see the header: the handler's only state
bool watch_installed = false;  // handlers are process-wide: a second watch would overwrite the first

extern "C" void note_signal(int signal_number) { received_signal = signal_number; }

}  // namespace

PreemptionWatch::PreemptionWatch() {
  TRLHPC_ASSERT(!watch_installed, "one PreemptionWatch at a time");
  received_signal = 0;
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // file and MPI calls interrupted by the signal go on
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGUSR1, &action, &previous_usr1_);
  watch_installed = true;
}

PreemptionWatch::~PreemptionWatch() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
  received_signal = 0;
  watch_installed = false;
}

int PreemptionWatch::local_signal() const { return static_cast<int>(received_signal); }

int PreemptionWatch::agreed_signal(Communicator& comm) const {
  int32_t signal_number = static_cast<int32_t>(received_signal);
  comm.all_reduce(std::span<int32_t>(&signal_number, 1), ReduceOp::Max);
  return signal_number;
}

void ignore_preemption_signals_from_now() {
  TRLHPC_ASSERT(!watch_installed, "a PreemptionWatch is still watching");
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGUSR1, SIG_IGN);
}

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace trlhpc
