#include "trlhpc/io/hdf5/parallel_hdf5.hpp"

#include <mpi.h>

#include "src/io/hdf5/hdf5_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

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
// system).
Hdf5Id mpio_file_access(ProcessGroup& group) {
  Hdf5Id fapl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_fapl_mpio(fapl.get(), group.mpi_comm(), MPI_INFO_NULL));
  TRLHPC_CHECK_HDF5(H5Pset_all_coll_metadata_ops(fapl.get(), true));
  return fapl;
}

[[noreturn]] void refuse_file(const std::string& what, const std::string& path) {
  throw RuntimeFailure(rank_prefix() + "parallel HDF5 could not " + what + " " + path + " (" + hdf5_error_string() +
                       "). " + kHdf5LockingHint +
                       "; check that the folder exists, is readable and is shared by every node");
}

// HDF5 prints a screen of HDF5-DIAG for every failed call unless told not to; trlhpc reports the
// innermost message itself (hdf5_error_string) in its exceptions.
void quiet_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace

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
  if (file_.get() < 0) return;
  herr_t rc = 0;
  {
    const auto scope = within_deadline("H5Fclose");
    datasets_.clear();
    rc = H5Fclose(file_.release());  // released first: an error is not followed by a second close
  }
  agree(rc >= 0, "closing the file");
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

void ParallelHdf5File::agree(bool ok, const std::string& what) {
  const std::string local = ok ? "" : hdf5_error_string();
  int32_t failed = ok ? 0 : 1;
  comm_->all_reduce(std::span<int32_t>(&failed, 1), ReduceOp::Max);
  if (!failed) return;
  throw RuntimeFailure(rank_prefix() + what + " in " + path_ + " failed" +
                       (ok ? " on another rank" : ": " + local));
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
