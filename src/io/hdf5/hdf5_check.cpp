#include "src/io/hdf5/hdf5_check.hpp"

#include <hdf5.h>

namespace trlhpc {
namespace {
herr_t collect_innermost(unsigned n, const H5E_error2_t* err, void* out) {
  if (n == 0 && err->desc) *static_cast<std::string*>(out) = std::string(err->func_name) + ": " + err->desc;
  return 0;
}
}  // namespace

std::string hdf5_error_string() {
  std::string message = "unknown HDF5 error";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_innermost, &message);
  return message;
}

}  // namespace trlhpc
