// `--dataset_name PATH --dataset_train_split SPLIT` as one load_dataset entry (dataset_source.hpp).
#include "trlhpc/data/dataset/dataset_source.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {

std::vector<std::string> resolve_dataset_files(const std::string& dataset_name, const std::string& split) {
  DatasetEntry entry;
  entry.path = dataset_name;
  entry.split = split;
  entry.origin = "--dataset_name " + dataset_name;
  entry.split_option = "--dataset_train_split";
  return resolve_entry_files(entry);
}

}  // namespace trlhpc::dataset
