#include "trlhpc/parallel/parallel_hdf5.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>

#include "src/parallel/hdf5_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/parallel/communicator.hpp"
#include "trlhpc/parallel/process_groups.hpp"

namespace trlhpc {

Hdf5Id& Hdf5Id::operator=(Hdf5Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}

void Hdf5Id::reset() noexcept {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

namespace {

// File access through MPI-IO over the group, metadata reads collective (all ranks make the same
// metadata calls in the same order, so one rank reads and broadcasts instead of all hitting the file
// system). Metadata writes are HDF5's default, independent (its cache flushes from a few ranks, with a
// barrier): a checkpoint holds a few dozen datasets (one per unit and kind), and the collective
// (two-phase) write of their metadata made H5Fclose cost twice as much across two nodes (tiny-chat:
// 0.5 s against 0.26 s, bench/RESULTS.md "Cross-node checkpoint save").
Hdf5Id mpio_file_access(ProcessGroup& group) {
  Hdf5Id fapl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_fapl_mpio(fapl.get(), group.mpi_comm(), MPI_INFO_NULL));
  TRLHPC_CHECK_HDF5(H5Pset_all_coll_metadata_ops(fapl.get(), true));
  return fapl;
}

[[noreturn]] void refuse_file(const std::string& what, const std::string& path) {
  throw RuntimeFailure(rank_prefix() + "parallel HDF5 could not " + what + " " + path + " (" + hdf5_error_string() +
                       "). On file systems without POSIX locks (some Lustre or NFS mounts) set "
                       "HDF5_USE_FILE_LOCKING=FALSE; check that the folder exists, is writable and is shared by "
                       "every node");
}

// HDF5 prints a screen of HDF5-DIAG for every failed call unless told not to; trlhpc reports the
// innermost message itself (hdf5_error_string) in its exceptions.
void quiet_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::vector<hsize_t> dims_of(const Shape& shape) { return std::vector<hsize_t>(shape.begin(), shape.end()); }

}  // namespace

ParallelHdf5File ParallelHdf5File::create(const std::string& path, ProcessGroup& group) {
  quiet_hdf5_errors();
  auto deadline = std::make_unique<DeadlineTimer>(group.timeout_seconds());
  const Hdf5Id fapl = mpio_file_access(group);
  hid_t id = -1;
  {
    const DeadlineTimer::Scope scope(*deadline, "parallel HDF5 H5Fcreate of " + path);
    id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  }
  if (id < 0) refuse_file("create", path);
  return ParallelHdf5File(path, Hdf5Id(id, H5Fclose), group.host(), std::move(deadline));
}

ParallelHdf5File ParallelHdf5File::open(const std::string& path, ProcessGroup& group) {
  quiet_hdf5_errors();
  auto deadline = std::make_unique<DeadlineTimer>(group.timeout_seconds());
  const Hdf5Id fapl = mpio_file_access(group);
  hid_t id = -1;
  {
    const DeadlineTimer::Scope scope(*deadline, "parallel HDF5 H5Fopen of " + path);
    id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  }
  if (id < 0) refuse_file("open", path);
  return ParallelHdf5File(path, Hdf5Id(id, H5Fclose), group.host(), std::move(deadline));
}

ParallelHdf5File::~ParallelHdf5File() {
  if (!deadline_) return;  // moved from
  const auto scope = within_deadline("H5Fclose");
  datasets_.clear();
  file_.reset();
}

void ParallelHdf5File::close() {
  if (file_.get() >= 0) agree_pending("the writes");
  if (file_.get() < 0) return;
  herr_t rc = 0;
  {
    const auto scope = within_deadline("H5Fclose");
    datasets_.clear();
    rc = H5Fclose(file_.release());  // released first: an error is not followed by a second close
  }
  agree(rc >= 0, "closing the file");
}

void ParallelHdf5File::discard() noexcept {
  if (file_.get() < 0 || !deadline_) return;
  // The bytes written so far are of no use: a file system that ran full gets them back before the close
  // writes the metadata it holds. Rank 0 only (one file); the close is collective, so every rank
  // reaches it after rank 0 truncated (a rank that is not rank 0 waits in H5Fclose's own
  // synchronisation, bounded by the deadline).
  if (comm_->rank() == 0 && ::truncate(path_.c_str(), 0) != 0) {
    // Nothing more to do: the close below still runs, under the deadline.
  }
  const auto scope = within_deadline("H5Fclose (discarding the file after a failed write)");
  datasets_.clear();
  H5Fclose(file_.release());
}

void ParallelHdf5File::create_dataset(const std::string& name, const Shape& shape) {
  TRLHPC_ASSERT(shape.size() == 1 || shape.size() == 2, "checkpoint dataset " + name + " must be 1-D or 2-D");
  const std::vector<hsize_t> dims = dims_of(shape);
  const Hdf5Id space(TRLHPC_CHECK_HDF5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)), H5Sclose);
  const Hdf5Id lcpl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  // Contiguous, allocated at creation: every rank's hyperslab writes land in a region all ranks agree on.
  const Hdf5Id dcpl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  hid_t id = -1;
  {
    const auto scope = within_deadline("H5Dcreate", name);
    id = H5Dcreate2(file_.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT);
  }
  // Allocation happens here: a full disk shows first. Recorded, agreed on by agree_pending().
  if (id < 0) return note_failure("creating dataset " + name);
  datasets_[name] = Hdf5Id(id, H5Dclose);
}

Shape ParallelHdf5File::open_dataset(const std::string& name) {
  if (!datasets_.count(name)) {
    TRLHPC_ASSERT(has_dataset(name), path_ + " has no dataset " + name);
    const auto scope = within_deadline("H5Dopen", name);
    datasets_[name] = Hdf5Id(TRLHPC_CHECK_HDF5(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT)), H5Dclose);
  }
  const Hdf5Id space(TRLHPC_CHECK_HDF5(H5Dget_space(dataset(name))), H5Sclose);
  const int rank = TRLHPC_CHECK_HDF5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  TRLHPC_CHECK_HDF5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  return Shape(dims.begin(), dims.end());
}

bool ParallelHdf5File::has_dataset(const std::string& name) const {
  // Each path component must exist before the next is asked about (H5Lexists' rule).
  const auto scope = within_deadline("H5Lexists", name);
  for (size_t slash = name.find('/'); ; slash = name.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? name : name.substr(0, slash);
    if (TRLHPC_CHECK_HDF5(H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT)) <= 0) return false;
    if (slash == std::string::npos) return true;
  }
}

hid_t ParallelHdf5File::dataset(const std::string& name) const {
  const auto it = datasets_.find(name);
  TRLHPC_ASSERT(it != datasets_.end(), "dataset " + name + " of " + path_ + " was not created or opened");
  return it->second.get();
}

Hdf5Id ParallelHdf5File::select(const std::string& name, std::span<const Hdf5Block> blocks, int64_t* count) const {
  Hdf5Id space(TRLHPC_CHECK_HDF5(H5Dget_space(dataset(name))), H5Sclose);
  const int rank = TRLHPC_CHECK_HDF5(H5Sget_simple_extent_ndims(space.get()));
  *count = 0;
  if (blocks.empty()) {
    TRLHPC_CHECK_HDF5(H5Sselect_none(space.get()));
    return space;
  }
  int64_t last_end = -1;  // the previous block's first element, for the ascending check
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  TRLHPC_CHECK_HDF5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  const int64_t C = static_cast<int64_t>(dims.back());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Hdf5Block& b = blocks[i];
    const int64_t first = b.row * C + b.col;
    TRLHPC_ASSERT(first > last_end && b.rows > 0 && b.cols > 0, "blocks of " + name + " must ascend and be non-empty");
    last_end = first;
    hsize_t start[2] = {static_cast<hsize_t>(b.row), static_cast<hsize_t>(b.col)};
    hsize_t extent[2] = {static_cast<hsize_t>(b.rows), static_cast<hsize_t>(b.cols)};
    if (rank == 1) {
      TRLHPC_ASSERT(b.row == 0 && b.rows == 1, "a 1-D dataset's block is one row: " + name);
      start[0] = start[1];
      extent[0] = extent[1];
    }
    TRLHPC_CHECK_HDF5(H5Sselect_hyperslab(space.get(), i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start, nullptr,
                                          extent, nullptr));
    *count += b.numel();
  }
  return space;
}

Hdf5Id ParallelHdf5File::select(const std::string& name, std::span<const Hdf5Slab> slabs, int64_t* count) const {
  Hdf5Id space(TRLHPC_CHECK_HDF5(H5Dget_space(dataset(name))), H5Sclose);
  *count = 0;
  if (slabs.empty()) {
    TRLHPC_CHECK_HDF5(H5Sselect_none(space.get()));
    return space;
  }
  TRLHPC_ASSERT(TRLHPC_CHECK_HDF5(H5Sget_simple_extent_ndims(space.get())) == 1,
                "slabs select elements of a 1-D dataset; " + name + " is not one");
  int64_t previous_last = -1;
  for (size_t i = 0; i < slabs.size(); ++i) {
    const Hdf5Slab& s = slabs[i];
    TRLHPC_ASSERT(s.count > 0 && s.block > 0 && (s.count == 1 || s.stride >= s.block) && s.start > previous_last,
                  "slabs of " + name + " must be non-empty, not overlap themselves, and ascend");
    previous_last = s.last();
    // HDF5 wants stride >= block even for one run.
    const hsize_t start = static_cast<hsize_t>(s.start), stride = static_cast<hsize_t>(s.count == 1 ? s.block : s.stride),
                  runs = static_cast<hsize_t>(s.count), block = static_cast<hsize_t>(s.block);
    TRLHPC_CHECK_HDF5(
        H5Sselect_hyperslab(space.get(), i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, &start, &stride, &runs, &block));
    *count += s.numel();
  }
  return space;
}

void ParallelHdf5File::write(const std::string& name, std::span<const Hdf5Block> blocks, std::span<const float> data) {
  if (!failure_.empty()) return;  // this rank failed already (maybe creating `name`): agree_pending reports it
  int64_t count = 0;
  const Hdf5Id file_space = select(name, blocks, &count);
  write_selection(name, file_space, count, data);
}

void ParallelHdf5File::write(const std::string& name, std::span<const Hdf5Slab> slabs, std::span<const float> data) {
  if (!failure_.empty()) return;
  int64_t count = 0;
  const Hdf5Id file_space = select(name, slabs, &count);
  write_selection(name, file_space, count, data);
}

void ParallelHdf5File::write_selection(const std::string& name, const Hdf5Id& file_space, int64_t count,
                                       std::span<const float> data) {
  TRLHPC_ASSERT(count == static_cast<int64_t>(data.size()), "write of " + name + ": the selection holds " +
                                                                 std::to_string(count) + " elements, the buffer " +
                                                                 std::to_string(data.size()));
  if (count == 0) return;
  const hsize_t n = static_cast<hsize_t>(count);
  const Hdf5Id memory(TRLHPC_CHECK_HDF5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  // Independent transfer: a rank writes its own blocks of space allocated at creation, with no
  // collective per dataset. Collective MPI-IO (two-phase) costs several round trips per call, which
  // across nodes made a save latency-bound (tiny-chat on the two local nodes: 50 s collective, 1.7 s
  // independent with batched agreement; one node: 7 s and 1.2 s).
  const Hdf5Id transfer(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_DATASET_XFER)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT));
  herr_t rc = -1;
  {
    const auto scope = within_deadline("H5Dwrite", name);
    rc = H5Dwrite(dataset(name), H5T_NATIVE_FLOAT, memory.get(), file_space.get(), transfer.get(), data.data());
  }
  if (rc < 0) note_failure("write of dataset " + name);
}

void ParallelHdf5File::note_failure(const std::string& what) {
  if (!failure_.empty()) return;
  failure_ = what;
  failure_detail_ = hdf5_error_string();
}

void ParallelHdf5File::agree_pending(const std::string& what, std::span<int64_t> sums) {
  const bool ok = failure_.empty();
  // One all-reduce for the verdict and the caller's sums: across nodes every round trip counts.
  std::vector<int64_t> values(1 + sums.size());
  values[0] = ok ? 0 : 1;
  std::copy(sums.begin(), sums.end(), values.begin() + 1);
  comm_->all_reduce(std::span<int64_t>(values));
  std::copy(values.begin() + 1, values.end(), sums.begin());
  if (values[0] == 0) return;
  // This rank's own failure when it had one ("write of dataset X in FILE failed: ..."), else the batch's.
  const std::string message = ok ? what + " in " + path_ + " failed on another rank"
                                 : failure_ + " in " + path_ + " failed: " + failure_detail_;
  failure_.clear();
  failure_detail_.clear();
  throw RuntimeFailure(rank_prefix() + message);
}

void ParallelHdf5File::agree(bool ok, const std::string& what) {
  const std::string local = ok ? "" : hdf5_error_string();
  int32_t failed = ok ? 0 : 1;
  comm_->all_reduce(std::span<int32_t>(&failed, 1), ReduceOp::Max);
  if (!failed) return;
  throw RuntimeFailure(rank_prefix() + what + " in " + path_ + " failed" +
                       (ok ? " on another rank" : ": " + local));
}

void ParallelHdf5File::write_text(const std::string& name, const std::string& text) {
  const hsize_t n = std::max<hsize_t>(text.size(), 1);
  const Hdf5Id space(TRLHPC_CHECK_HDF5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  // Contiguous and allocated at creation, as create_dataset's: rank 0 alone can then write the bytes,
  // independently (a collective write costs several round trips across nodes for one rank's data).
  const Hdf5Id dcpl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  hid_t id = -1;
  {
    const auto scope = within_deadline("H5Dcreate", name);
    id = H5Dcreate2(file_.get(), name.c_str(), H5T_NATIVE_UCHAR, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT);
  }
  if (id < 0) return note_failure("creating dataset " + name);
  const Hdf5Id dataset_id(id, H5Dclose);
  if (comm_->rank() != 0 || !failure_.empty()) return;
  const Hdf5Id transfer(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_DATASET_XFER)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_INDEPENDENT));
  const std::string bytes = text.empty() ? std::string(1, '\0') : text;
  herr_t rc = -1;
  {
    const auto scope = within_deadline("H5Dwrite", name);
    rc = H5Dwrite(id, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, transfer.get(), bytes.data());
  }
  if (rc < 0) note_failure("write of dataset " + name);
}

std::string ParallelHdf5File::read_text(const std::string& name) {
  const Shape shape = open_dataset(name);
  // A text dataset is a manifest (megabytes at most); the bound keeps a damaged file from asking for
  // an allocation of any size.
  constexpr int64_t kMaxTextBytes = int64_t{1} << 30;
  if (shape.size() != 1 || shape[0] > kMaxTextBytes)
    throw UserError(path_ + ": dataset " + name + " is not a text of at most 1 GiB (shape " + shape_string(shape) +
                    "); the file is damaged");
  std::string text(static_cast<size_t>(shape[0]), '\0');
  if (!text.empty())
    TRLHPC_CHECK_HDF5(H5Dread(dataset(name), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()));
  return text;
}

void ParallelHdf5File::read(const std::string& name, std::span<const Hdf5Block> blocks, std::span<float> data) {
  int64_t count = 0;
  const Hdf5Id file_space = select(name, blocks, &count);
  read_selection(name, file_space, count, data);
}

void ParallelHdf5File::read(const std::string& name, std::span<const Hdf5Slab> slabs, std::span<float> data) {
  int64_t count = 0;
  const Hdf5Id file_space = select(name, slabs, &count);
  read_selection(name, file_space, count, data);
}

void ParallelHdf5File::read_selection(const std::string& name, const Hdf5Id& file_space, int64_t count,
                                      std::span<float> data) {
  TRLHPC_ASSERT(count == static_cast<int64_t>(data.size()), "read of " + name + ": the selection holds " +
                                                                std::to_string(count) + " elements, the buffer " +
                                                                std::to_string(data.size()));
  if (count == 0) return;
  const hsize_t n = static_cast<hsize_t>(count);
  const Hdf5Id memory(TRLHPC_CHECK_HDF5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
  TRLHPC_CHECK_HDF5(H5Dread(dataset(name), H5T_NATIVE_FLOAT, memory.get(), file_space.get(), H5P_DEFAULT, data.data()));
}

}  // namespace trlhpc
