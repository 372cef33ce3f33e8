// The parts of a checkpoint save without MPI-IO (issue 30): rank 0 lays an HDF5 file out with serial
// HDF5 (create_preallocated_hdf5) and every rank writes its runs into the regions it was told
// (FileRegionWriter, pwrite). Real files and real parallel HDF5 on every rank count (np 1, 2, 4, 8):
//   - what the ranks wrote, contiguous and strided, reads back through parallel HDF5 (MPI-IO), exactly,
//     with the byte dataset (the manifest's copy) beside the float32 ones;
//   - a disk that fills while the ranks write: the writer throws, naming the file, the offset and the
//     OS's reason, at the latest in finish() (which writes what it held back and fsyncs). The disk is a
//     1 MiB tmpfs mounted by rank 0 (needs root or CAP_SYS_ADMIN; skipped otherwise) holding a 4 MiB
//     dataset. (How the ranks agree on such a failure and abandon the save is write_checkpoint's, tested
//     end to end by e2e.test_checkpoint_unshared_dir and e2e.test_checkpoint_disk_full.)
//   - a file that is not there (a node that does not see rank 0's folder): named, with the OS's reason.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/io/file_region_writer.hpp"
#include "trlhpc/io/hdf5/hdf5_preallocated_file.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {
namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void broadcast_string(std::string& text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(length));
  if (length > 0) MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
}

// A folder every rank names the same; rank 0 creates it and removes it at the end. With `tmpfs_size`,
// rank 0 mounts a tmpfs of that size there (mounted() says whether it could).
class SharedFolder {
 public:
  explicit SharedFolder(const std::string& tag, const char* tmpfs_size = nullptr) {
    int mounted = 0;
    if (world_rank() == 0) {
      dir_ = testing::make_temp_dir(tag);
      if (tmpfs_size)
        mounted = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, (std::string("size=") + tmpfs_size).c_str()) == 0 ? 1 : 0;
    }
    MPI_Bcast(&mounted, 1, MPI_INT, 0, MPI_COMM_WORLD);
    broadcast_string(dir_);
    mounted_ = mounted != 0;
  }
  ~SharedFolder() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() != 0) return;
    if (mounted_) ::umount(dir_.c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool mounted() const { return mounted_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Rank 0 creates `path` with `datasets`; every rank gets the offsets (empty on every rank, with the
// error in `error` on rank 0, when the creation failed).
std::vector<int64_t> lay_out_on_rank_0(const std::string& path, const std::vector<Hdf5PlannedDataset>& datasets,
                                       std::string* error) {
  std::vector<int64_t> offsets(datasets.size(), -1);
  if (world_rank() == 0) try {
      offsets = create_preallocated_hdf5(path, datasets);
    } catch (const RuntimeFailure& e) {
      *error = e.what();
    }
  int ok = error->empty() ? 1 : 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return {};
  MPI_Bcast(offsets.data(), static_cast<int>(offsets.size()), MPI_INT64_T, 0, MPI_COMM_WORLD);
  return offsets;
}

float value_at(int64_t i) { return 0.5f * static_cast<float>(i) + 1.0f; }

TEST(CheckpointStateFile, RunsEveryRankWroteReadBackThroughParallelHdf5) {
  const SharedFolder folder("state_file");
  const int rank = world_rank(), size = world_size();
  const std::string path = folder.dir() + "/state.h5";
  const int64_t per_rank = 1000, strided = 37;
  const std::string text = "{\"step\": 4}";
  const std::vector<Hdf5PlannedDataset> datasets = {
      {"params/unit-0", per_rank * size + 3},  // the last 3 elements: rank 0's, after the others'
      {"exp_avg/unit-0", strided},             // element i written by rank i % size, one pwrite each
      {"trlhpc_manifest", static_cast<int64_t>(text.size()), Hdf5PlannedDataset::Type::Byte}};
  std::string error;
  const std::vector<int64_t> offsets = lay_out_on_rank_0(path, datasets, &error);
  ASSERT_EQ(offsets.size(), datasets.size()) << error;
  std::vector<float> values(static_cast<size_t>(per_rank * size + 3));
  for (size_t i = 0; i < values.size(); ++i) values[i] = value_at(static_cast<int64_t>(i));
  {
    FileRegionWriter file(path);
    // Two runs that continue each other in the file and in memory: joined into one pwrite.
    const int64_t first = rank * per_rank, half = per_rank / 2;
    file.write(offsets[0] + 4 * first, &values[static_cast<size_t>(first)], 4 * half);
    file.write(offsets[0] + 4 * (first + half), &values[static_cast<size_t>(first + half)], 4 * (per_rank - half));
    if (rank == 0) file.write(offsets[0] + 4 * per_rank * size, &values[static_cast<size_t>(per_rank * size)], 4 * 3);
    for (int64_t i = rank; i < strided; i += size) file.write(offsets[1] + 4 * i, &values[static_cast<size_t>(i)], 4);
    if (rank == 0) file.write(offsets[2], text.data(), text.size());
    file.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's bytes are in the file (finish fsynced)

  MpiCommunicatorOptions options;
  options.timeout_seconds = 60;
  std::vector<int> ranks(static_cast<size_t>(size));
  std::iota(ranks.begin(), ranks.end(), 0);
  ProcessGroup group(GroupKind::World, MpiComm::duplicate(MPI_COMM_WORLD), ranks, options);
  ParallelHdf5File file = ParallelHdf5File::open(path, group);
  ASSERT_EQ(file.open_dataset("params/unit-0"), (Shape{per_rank * size + 3}));
  ASSERT_EQ(file.open_dataset("exp_avg/unit-0"), (Shape{strided}));
  std::vector<float> back(values.size());
  const Hdf5Block all{0, 0, 1, per_rank * size + 3};
  file.read("params/unit-0", std::span<const Hdf5Block>(&all, 1), back);
  EXPECT_EQ(back, values);
  std::vector<float> back_strided(static_cast<size_t>(strided));
  const Hdf5Block all_strided{0, 0, 1, strided};
  file.read("exp_avg/unit-0", std::span<const Hdf5Block>(&all_strided, 1), back_strided);
  EXPECT_EQ(back_strided, std::vector<float>(values.begin(), values.begin() + strided));
  EXPECT_EQ(file.read_text("trlhpc_manifest"), text);
  file.close();
}

TEST(CheckpointStateFile, WriteOnAFullDiskNamesTheFileAndTheCause) {
  const SharedFolder disk("state_file_full_disk", "1m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a 1 MiB tmpfs (needs root or CAP_SYS_ADMIN)";
  const int rank = world_rank(), size = world_size();
  const std::string path = disk.dir() + "/state.h5";
  constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of float32: four times the disk
  std::string error;
  const std::vector<int64_t> offsets = lay_out_on_rank_0(path, {{"params/unit-0", kElements}}, &error);
  // Laying it out takes no room: the data region stays sparse until written.
  ASSERT_EQ(offsets.size(), 1u) << error;
  const int64_t per_rank = kElements / size;
  const std::vector<float> mine(static_cast<size_t>(per_rank), 1.0f + static_cast<float>(rank));
  std::string message;
  try {
    FileRegionWriter file(path);
    file.write(offsets[0] + 4 * rank * per_rank, mine.data(), 4 * mine.size());
    file.finish();  // the run is held back until here
  } catch (const RuntimeFailure& e) {
    message = e.what();
  }
  int failed = message.empty() ? 0 : 1, failed_anywhere = 0;
  MPI_Allreduce(&failed, &failed_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(failed_anywhere, 1) << "4 MiB were written on a 1 MiB disk without an error";
  if (failed) {
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(std::strerror(ENOSPC)), std::string::npos) << message;
  }
}

TEST(CheckpointStateFile, AFileThatIsNotThereIsNamed) {
  const SharedFolder folder("state_file_missing");
  const std::string path = folder.dir() + "/checkpoint-4.tmp/state.h5";
  try {
    FileRegionWriter file(path);
    FAIL() << "opened " << path << ", which does not exist";
  } catch (const RuntimeFailure& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot open " + path + " for writing"), std::string::npos) << message;
    EXPECT_NE(message.find(std::strerror(ENOENT)), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace trlhpc
