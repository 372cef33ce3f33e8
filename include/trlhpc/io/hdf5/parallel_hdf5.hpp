#pragma once
// ParallelHdf5File: one HDF5 file opened read-only by every rank of a process group through MPI-IO
// (parallel HDF5's mpio driver), for resuming checkpoints. The file holds float32 datasets; each rank
// reads only the blocks (rectangles) or slabs (strided runs of a 1-D dataset) it holds.
//
//   open / open_dataset / has_dataset / read_text / close   collective over the group (HDF5 metadata
//                                                           operations; metadata reads collective:
//                                                           one rank reads and broadcasts)
//   read                                                    independent: each rank its own blocks
//
// Checkpoints are written without it (no MPI-IO: opening and closing a file through MPI-IO cost ~20
// collective round trips, which made saves across nodes latency-bound): rank 0 lays state.h5 out with
// serial HDF5 (hdf5_preallocated_file.hpp) and every rank pwrite()s its share (io/file_region_writer.hpp).
//
// Blocks are rectangles of a 2-D dataset (a 1-D dataset is one row); slabs are strided runs of a 1-D
// dataset (a rectangle of a tensor stored row-major inside a longer 1-D dataset: checkpoint format 2
// keeps all tensors of a unit in one). The elements of a rank's blocks or slabs map to its buffer in
// the dataset's row-major order, which is how HDF5 iterates a union of hyperslabs whatever order they
// were added in: callers list them in ascending position, each after the previous one's last element
// (checked).
//
// A deadline (issue 30): every collective HDF5 call runs under a DeadlineTimer (deadline_timer.hpp) of
// the group's --ddp_timeout: one that still hangs ends the job (exit 2) with a line naming the call and
// file. close() agrees on its success (an all-reduce). HDF5's automatic error printing (HDF5-DIAG
// screens) is turned off: errors are reported by the exceptions, with HDF5's innermost message.
//
// File locking: HDF5 1.10.7+ locks files it opens; some Lustre/NFS mounts have no flock and the open
// fails. The error then says to set HDF5_USE_FILE_LOCKING=FALSE (read by HDF5 itself).
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/comm/deadline_timer.hpp"

namespace trlhpc {

class Communicator;
class ProcessGroup;

// A rectangle [row, row + rows) x [col, col + cols) of a dataset viewed as (R, C); R = 1 for 1-D.
struct Hdf5Block {
  int64_t row = 0, col = 0, rows = 0, cols = 0;
  int64_t numel() const { return rows * cols; }
  bool operator==(const Hdf5Block&) const = default;
};

// `count` runs of `block` elements of a 1-D dataset, the first at `start`, each `stride` after the
// previous (HDF5's hyperslab). Rectangle rows x cols at (row, col) of a C-column tensor stored row-major
// from element `base`: {base + row * C + col, C, rows, cols}. One contiguous run: count 1.
struct Hdf5Slab {
  int64_t start = 0, stride = 0, count = 0, block = 0;
  int64_t numel() const { return count * block; }
  int64_t last() const { return start + (count - 1) * stride + block - 1; }  // the last element
  bool contiguous() const { return count == 1 || stride == block; }
  bool operator==(const Hdf5Slab&) const = default;
};

// Owner of one HDF5 identifier; closes it with the matching H5?close.
class Hdf5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Hdf5Id() = default;
  Hdf5Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Hdf5Id() { reset(); }
  Hdf5Id(Hdf5Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Hdf5Id& operator=(Hdf5Id&& o) noexcept;
  Hdf5Id(const Hdf5Id&) = delete;
  Hdf5Id& operator=(const Hdf5Id&) = delete;
  hid_t get() const { return id_; }
  // Gives up ownership without closing.
  hid_t release() noexcept {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  void reset() noexcept;

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

class ParallelHdf5File {
 public:
  // Collective, read-only. Throws RuntimeFailure naming the path (and the file-locking hint) when HDF5
  // refuses.
  static ParallelHdf5File open(const std::string& path, ProcessGroup& group);
  ~ParallelHdf5File();  // closes (collective, under the deadline); call close() to see errors
  ParallelHdf5File(ParallelHdf5File&&) noexcept = default;
  ParallelHdf5File& operator=(ParallelHdf5File&&) noexcept = default;

  const std::string& path() const { return path_; }
  bool is_open() const { return file_.get() >= 0; }
  // Collective: opens an existing dataset. Its shape, or RuntimeFailure if absent.
  Shape open_dataset(const std::string& name);
  bool has_dataset(const std::string& name) const;  // collective
  // Collective (opens the dataset): the bytes of a 1-D byte dataset (the manifest's copy).
  std::string read_text(const std::string& name);
  // Independent: reads this rank's blocks into data.
  void read(const std::string& name, std::span<const Hdf5Block> blocks, std::span<float> data);
  void read(const std::string& name, std::span<const Hdf5Slab> slabs, std::span<float> data);
  // Collective: closes every dataset and the file; the ranks agree on its success.
  void close();

 private:
  ParallelHdf5File(std::string path, Hdf5Id file, Communicator& comm, std::unique_ptr<DeadlineTimer> deadline)
      : path_(std::move(path)), file_(std::move(file)), comm_(&comm), deadline_(std::move(deadline)) {}
  // `call` ("H5Dopen of params/x") under the deadline.
  DeadlineTimer::Scope within_deadline(const char* call, const std::string& object = "") const {
    return DeadlineTimer::Scope(*deadline_, std::string("parallel HDF5 ") + call + (object.empty() ? "" : " " + object) +
                                                " of " + path_);
  }
  // Collective: throws on every rank when `ok` is false on any.
  void agree(bool ok, const std::string& what);
  hid_t dataset(const std::string& name) const;
  // The file selection of `blocks` / `slabs` on `name`'s dataspace (none when empty) and its element count.
  Hdf5Id select(const std::string& name, std::span<const Hdf5Block> blocks, int64_t* count) const;
  Hdf5Id select(const std::string& name, std::span<const Hdf5Slab> slabs, int64_t* count) const;
  // Independent transfer of the selection `file_space` (of `count` elements) of `name` into `data`.
  void read_selection(const std::string& name, const Hdf5Id& file_space, int64_t count, std::span<float> data);

  std::string path_;
  Hdf5Id file_;
  Communicator* comm_ = nullptr;  // the group's
  std::unique_ptr<DeadlineTimer> deadline_;  // the group's --ddp_timeout, for every collective HDF5 call
  std::map<std::string, Hdf5Id> datasets_;
};

}  // namespace trlhpc
