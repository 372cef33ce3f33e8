#include "trlhpc/io/hdf5/hdf5_preallocated_file.hpp"

#include <hdf5.h>

#include "src/io/hdf5/hdf5_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hdf5/parallel_hdf5.hpp"

namespace trlhpc {
namespace {

[[noreturn]] void refuse(const std::string& what, const std::string& path) {
  throw RuntimeFailure("HDF5 could not " + what + " " + path + " (" + hdf5_error_string() +
                       "). " + kHdf5LockingHint +
                       "; check that the folder exists and is writable");
}

}  // namespace

std::vector<int64_t> create_preallocated_hdf5(const std::string& path, std::span<const Hdf5PlannedDataset> datasets) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors reported by the exceptions, not HDF5-DIAG screens
  // The default (sec2) driver: one process, plain POSIX I/O, no MPI-IO.
  Hdf5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (file.get() < 0) refuse("create", path);
  const Hdf5Id lcpl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  // Contiguous (the data of a dataset is one region), allocated now (so it has an address), never
  // filled (its bytes are written by the writers; filling would write the whole file twice).
  const Hdf5Id dcpl(TRLHPC_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE)), H5Pclose);
  TRLHPC_CHECK_HDF5(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS));
  TRLHPC_CHECK_HDF5(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY));
  TRLHPC_CHECK_HDF5(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER));
  std::vector<int64_t> offsets;
  offsets.reserve(datasets.size());
  for (const Hdf5PlannedDataset& d : datasets) {
    TRLHPC_ASSERT(d.elements > 0, "dataset " + d.name + " of " + path + " must hold at least one element");
    const hsize_t n = static_cast<hsize_t>(d.elements);
    const Hdf5Id space(TRLHPC_CHECK_HDF5(H5Screate_simple(1, &n, nullptr)), H5Sclose);
    const hid_t type = d.type == Hdf5PlannedDataset::Type::Float32 ? H5T_IEEE_F32LE : H5T_STD_U8LE;
    const Hdf5Id dataset(H5Dcreate2(file.get(), d.name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                         H5Dclose);
    if (dataset.get() < 0) refuse("create dataset " + d.name + " in", path);
    const haddr_t address = H5Dget_offset(dataset.get());
    if (address == HADDR_UNDEF) refuse("locate the data of dataset " + d.name + " in", path);
    offsets.push_back(static_cast<int64_t>(address));
  }
  // The metadata is written here; the file is extended to its end of allocation (the data regions).
  if (H5Fclose(file.release()) < 0) refuse("close", path);
  return offsets;
}

}  // namespace trlhpc
