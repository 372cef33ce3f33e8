#pragma once
// Room for a checkpoint on --output_dir's file system, reserved before parallel HDF5 opens anything
// (issue 30): a disk that cannot hold the checkpoint is refused while no HDF5 file is open, the same on
// every rank (rank 0 decides, run_on_root shares it), instead of failing inside HDF5's collective
// writes and close, whose error paths are not collective.
//
// The reservation is a placeholder file, checkpoint-STEP.tmp/.space_reserved, given the checkpoint's
// estimated size with fallocate(2) (which also counts against quotas, unlike a statvfs look at free
// space); it is deleted just before the HDF5 file is created, so the space it held is what the state
// file then takes. On file systems without fallocate (EOPNOTSUPP: some NFS) the free space statvfs
// reports is compared instead. Another writer on the same file system can still take the space between
// the two: the write then fails, the ranks agree on it and the partial folder is removed
// (checkpoint.cpp), with parallel_hdf5's deadline as the last resort.
#include <cstdint>
#include <string>

namespace trlhpc::checkpoint {

inline constexpr const char* kSpaceReservationFile = ".space_reserved";

// Bytes a checkpoint takes on disk: the state file's data (`data_bytes`), its HDF5 metadata (an
// allowance per dataset, measured ~0.7 KiB, taken as 4 KiB, plus 1 MiB), the manifest twice (embedded in
// state.h5 and as manifest.json) and the tokenizer files copied into it.
int64_t checkpoint_bytes_estimate(int64_t data_bytes, int64_t num_datasets, int64_t manifest_bytes,
                                  const std::string& tokenizer_dir);

// Reserves `bytes` in the folder `tmp_dir` (checkpoint-STEP.tmp of output_dir). Throws RuntimeFailure
// "disk full: ..." naming output_dir, the bytes needed and free, and what to do, when the file system
// (or a quota) cannot give them; another RuntimeFailure for other I/O errors. Local (rank 0's part).
void reserve_space(const std::string& tmp_dir, const std::string& output_dir, int64_t step, int64_t bytes);

// Gives the reservation back (deletes the placeholder; nothing when there is none). Local.
void release_space(const std::string& tmp_dir);

// After a failed write: "disk full: ..." when the file system of output_dir has less room than `bytes`
// even counting what the partial folder tmp_dir holds (about to be deleted); "" otherwise. Local.
std::string disk_full_verdict(const std::string& tmp_dir, const std::string& output_dir, int64_t step, int64_t bytes);

}  // namespace trlhpc::checkpoint
