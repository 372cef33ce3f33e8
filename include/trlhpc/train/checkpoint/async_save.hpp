#pragma once
// AsyncCheckpointSaver (`--async_save`): a checkpoint is copied to host memory at the step it is
// taken (the only time training waits) and written and committed by a background thread while
// training goes on, on its own duplicate of the world communicator.
//
// Why it is correct to overlap:
//   - the values written are the host copy taken between two steps, so later steps cannot change
//     them; the manifest and the progress come from the same moment;
//   - the writer talks MPI only on its own communicator (MPI_THREAD_MULTIPLE; the constructor refuses
//     a library without it), so its collectives cannot match the training's;
//   - HDF5 (not built thread-safe by Debian) is used by one thread at a time: the training thread
//     touches HDF5 only to save or load a checkpoint, and start() and wait() join the writer first;
//   - the commit is the same as the synchronous one (commit.hpp), so a crash during the background
//     write leaves every earlier checkpoint intact and `latest` on a complete one.
// Decisions that change control flow (a failed save) are taken only in wait(), which every rank calls
// at the same point of the loop (the next save, a preemption, the end), so ranks never part ways.
//
// Cost: one host copy of the rank's share of params + exp_avg + exp_avg_sq (3x its fp32 master
// shard) held until the write finishes, and a writer thread competing with compute for cores.
#include <memory>
#include <string>
#include <thread>

#include "trlhpc/train/checkpoint/checkpoint.hpp"

namespace trlhpc {
class ProcessGroups;
}

namespace trlhpc::checkpoint {

class AsyncCheckpointSaver {
 public:
  // Collective over groups.world(). timeout_seconds: the hang watchdog's limit for the writer's
  // collectives (--ddp_timeout). UserError (on every rank) when MPI lacks MPI_THREAD_MULTIPLE.
  AsyncCheckpointSaver(ProcessGroups& groups, double timeout_seconds);
  ~AsyncCheckpointSaver();  // waits for a write under way (its failure is then only printed)
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // Collective (at the same point on every rank): waits for the previous save (rethrowing its
  // failure), copies the trainer's state to the host and starts writing it.
  void start(const SaveRequest& request, Trainer& trainer);
  // Collective: blocks until the save under way is committed and returns its folder ("" when none
  // was under way); rethrows its failure, the same on every rank.
  std::string wait();
  // The folder of a save committed since the last call, "" otherwise. Not collective: ranks may see
  // the commit at different steps, so use it for messages only.
  std::string take_committed();
  // Seconds the last finished background write took, from the host copy to the commit (0 before).
  double last_write_seconds() const;

 private:
  struct Job;
  std::shared_ptr<ProcessGroup> group_;  // the writer's duplicate of the world group
  std::shared_ptr<Job> job_;             // the save under way or last finished (shared with its thread)
  std::thread thread_;
};

}  // namespace trlhpc::checkpoint
