#pragma once
// What `datasets.load_dataset(path, name, data_dir=, data_files=, split=)` would read, as a list of local
// files, and TRL's dataset mixtures built from several such calls (trl.scripts.utils.get_dataset).
//
// One DatasetEntry is one load_dataset call on a local file or folder (hub ids are resolved to their
// cache snapshot before, cli/hub_names):
//   - a file: that file, whatever the split;
//   - data_files given: its patterns, relative to path/data_dir, pick the files of each split;
//   - else the folder's README.md `configs:` block (dataset_card.hpp): config `name`, or the default
//     one; its data_files (relative to the folder) or, without them, the splits inferred under its data_dir;
//   - else `name` is the subset folder path/NAME/ (multi-config repos without a card);
//   - else the splits inferred under path/data_dir (data_files.hpp).
// Then `split` picks one of the splits; a missing one is a UserError naming the dataset, the split,
// the splits there are, and `split_option` (the flag or mixture key that chose it).
//
// A DatasetSource concatenates its entries in order (datasets.concatenate_datasets), keeping only
// `columns` of an entry's rows when given (Dataset.select_columns). With test_split_size it is then
// cut like Dataset.train_test_split(test_size): ceil(size * rows) test rows (a fraction in (0, 1)) and
// the rest train, both in the order of a permutation of the rows. TRL passes no seed there (a
// different split every run); trlhpc draws the permutation from --seed so runs repeat.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/data/dataset/dataset_card.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {

struct DatasetEntry {
  std::string path;                             // local file or folder
  std::string name;                             // config (subset); empty: the default
  std::string data_dir;                         // relative to path
  std::optional<DataFilesPatterns> data_files;  // relative to path/data_dir
  std::string split = "train";
  std::vector<std::string> columns;             // empty: every column
  std::string origin;        // how errors name the entry: "--dataset_name X", "mix.yaml datasets[1] (path: X)"
  std::string split_option;  // the flag or key that chose the split: "--dataset_train_split", "its split: key"
  std::string missing_split_hint;  // appended to the missing-split error (another way out), may be empty
  // A folder with a single split (e.g. unnamed files, all "train") gives that split whatever `split`
  // says: --eval_dataset FOLDER reads the folder's --dataset_test_split split, or all of a one-split folder.
  bool single_split_fallback = false;
};

struct DatasetSource {
  std::vector<DatasetEntry> entries;            // concatenated in this order
  std::optional<double> test_split_size;        // cut the concatenation into train and test
  bool test_side = false;                       // with test_split_size: read the test rows, not the train rows
  std::string origin;                           // names the mixture in errors ("mix.yaml datasets")
};

// The files one entry reads, in reading order.
std::vector<std::string> resolve_entry_files(const DatasetEntry& entry);

// Every entry's files and column selection, ready for DatasetReader, in order.
std::vector<DatasetPart> resolve_source(const DatasetSource& source);

// The rows of a `rows`-row dataset that one side of train_test_split(test_size) keeps, in its order:
// a permutation drawn from `seed`, its first ceil(test_size * rows) entries the test rows, the rest the
// train rows. UserError (naming `origin`) when a side would be empty.
std::vector<int64_t> split_rows(int64_t rows, double test_size, uint64_t seed, bool test_side, const std::string& origin);

}  // namespace trlhpc::dataset
