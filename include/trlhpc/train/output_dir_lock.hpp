#pragma once
// One run at a time per --output_dir (issue 30, item 5): two runs sharing a folder share
// checkpoint-N.tmp, `latest` and metrics.jsonl, and destroy each other's checkpoints.
//
// The lock is a file, OUTPUT_DIR/.trlhpc.lock, created with O_CREAT | O_EXCL (atomic on local file
// systems, NFSv3+ and Lustre, which flock() is not on every mount), holding "host pid job-id start-time"
// of the holder. Taken by global rank 0 before the run writes anything, removed when the run ends
// (also on an error: RAII). A lock file left by a run that died is stale when it names this host and a
// pid that no longer runs (gone or a zombie; a holder still exiting gets 15 s): it is replaced (and the
// log says so). One naming another host cannot be
// checked from here: the run is refused with the holder named, and the user removes the file once that
// job is gone.
#include <string>

namespace trlhpc {

class OutputDirLock {
 public:
  // Takes the lock of `output_dir` (created if missing). UserError naming the holder when another live
  // run holds it; RuntimeFailure when the file cannot be created (a read-only folder is a UserError).
  explicit OutputDirLock(const std::string& output_dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

  // Non-empty when a stale lock (a dead run on this host) was replaced: what it named.
  const std::string& replaced_stale() const { return replaced_stale_; }

 private:
  std::string path_;
  std::string replaced_stale_;
};

}  // namespace trlhpc
