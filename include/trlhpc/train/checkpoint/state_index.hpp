#pragma once
// Where each tensor of a checkpoint lies in its state.h5, by the manifest's "format_version":
//
//   1  one dataset per kind and tensor: KIND/NAME of the tensor's full shape (2-D or 1-D). The
//      manifest's "datasets" holds {"shape", "checksum"} per dataset. Written by trlhpc up to
//      2026-12-03; read, never written, by this one.
//   2  one 1-D dataset per kind and parameter unit: KIND/unit-U holds the unit's tensors one after
//      another, each in its full shape's row-major order. The manifest's "datasets" holds {"shape": [N]}
//      per dataset and its "tensors" is the index:
//        NAME -> {"unit": "unit-U", "offset": first element in the unit's datasets, "shape": full shape,
//                 "checksums": {KIND: checksum}}
//
// KIND is params (fp32 master weights), exp_avg or exp_avg_sq (AdamW moments). Checksums are per kind
// and tensor in both formats, over the tensor's own row-major element index (state.hpp), so a
// damaged byte is blamed on its tensor. Why format 2: creating a dataset is a collective metadata
// operation of parallel HDF5; one per unit and kind (3 x (layers + 2)) instead of one per tensor and
// kind (3 x 12 per layer) is what made a save across nodes stop being latency-bound
// (bench/RESULTS.md "Cross-node checkpoint save").
//
// The index is untrusted input like the rest of the manifest (docs/UNTRUSTED_INPUT.md): from_manifest
// checks it whole, on every rank alike, before any collective; the tensors read through it are then
// checked against their checksums.
#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/core/tensor.hpp"

namespace trlhpc::checkpoint {

inline constexpr std::array<const char*, 3> kStateKinds = {"params", "exp_avg", "exp_avg_sq"};

// "unit-U": the format-2 dataset of unit U is KIND/unit-U.
std::string unit_dataset_suffix(int unit);

// Where one tensor of one kind lies.
struct TensorLocation {
  std::string dataset;   // KIND/NAME (format 1) or KIND/unit-U (format 2)
  bool packed = false;   // format 2: a 1-D dataset holding the tensors of a unit
  int64_t offset = 0;    // packed: the tensor's first element in the dataset
  Shape shape;           // packed: the tensor's full shape as the index gives it; format 1: empty
  std::string checksum;  // the manifest's; "" when it lists none (the check then fails)
};

class StateIndex {
 public:
  // The index of checkpoint `dir`'s manifest (read_manifest checked its version and field types).
  // UserError naming DIR/manifest.json when a format-2 index is missing or damaged: "tensors" absent or
  // not an object, an entry without a unit, offset, shape or a checksum per kind, a unit without a
  // dataset of every kind, a tensor past the end of its dataset or overlapping another.
  static StateIndex from_manifest(const std::string& dir, const nlohmann::json& manifest);

  int format_version() const { return version_; }
  // Where tensor `name` of `kind` lies; UserError naming the manifest when a format-2 index lacks it.
  TensorLocation locate(const std::string& kind, const std::string& name) const;
  // The shape the manifest gives a packed dataset (format 2).
  Shape packed_dataset_shape(const std::string& dataset) const;

 private:
  struct Entry {
    std::string unit;
    int64_t offset = 0;
    Shape shape;
    std::map<std::string, std::string> checksums;  // kind -> checksum
  };
  int version_ = 1;
  std::string manifest_path_;
  nlohmann::json v1_datasets_;                   // format 1: the manifest's "datasets"
  std::map<std::string, Entry> tensors_;         // format 2: the index
  std::map<std::string, int64_t> packed_sizes_;  // format 2: dataset -> elements
};

}  // namespace trlhpc::checkpoint
