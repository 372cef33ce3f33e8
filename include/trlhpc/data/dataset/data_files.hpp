#pragma once
// Which files of a dataset folder make up which split, as Hugging Face `datasets` decides it
// (datasets/data_files.py, 2.16+ with fsspec >= 2023.12; the rules its docs describe under
// "Split pattern hierarchy" of the repository-structure guide):
//
//   1. data/SPLIT-NNNNN-of-NNNNN*.*   shards `push_to_hub` writes, any split name (`custom-00000-of-00001`);
//   2. a folder named after a split keyword anywhere in the path (train/, data/test_0/, my-validation/);
//   3. a file name that starts with a keyword followed by a delimiter (train.jsonl, test-0.parquet) or
//      holds one between delimiters (my.train.json, data_valid_2.jsonl);
//   4. otherwise every file is "train".
// The first rule that matches any file decides alone (a train/ folder hides a top-level test.jsonl).
// Keywords: train <- train, training; validation <- validation, valid, dev, val; test <- test, testing,
// eval, evaluation. Delimiters: - . _ space and digits. Split order: train, validation, test, then the
// other names sorted. Within a split, files come pattern by pattern (keyword by keyword), each
// pattern's files sorted by path, so the row order is the one `load_dataset` reads.
// Files and folders whose name starts with '.' or "__", and the names datasets ignores (README.md,
// config.json, dataset_info.json, dataset_infos.json, dataset_dict.json, dummy_data.zip) are never data.
//
// Globs (data_files patterns, README `configs:` paths) follow the same library: '*' and '?' within one
// path segment, "[...]"/"[!...]" character classes, a "**" segment for zero or more folders.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace trlhpc::dataset {

// Bounds on untrusted folder listings and patterns (docs/UNTRUSTED_INPUT.md).
inline constexpr size_t kMaxDatasetFiles = 100000;   // files listed under one dataset folder
inline constexpr size_t kMaxPatternLength = 1024;    // bytes of one data_files pattern

// True when `path` ('/'-separated, relative) matches the glob `pattern`.
bool glob_matches(std::string_view pattern, std::string_view path);

// Every file under `root` (following file symlinks, as a Hub snapshot's links into blobs/, but not
// folder links), as '/'-separated paths relative to root, sorted; hidden and ignored names left out.
// UserError past kMaxDatasetFiles.
std::vector<std::string> dataset_folder_files(const std::filesystem::path& root);

// The files of `files` (relative paths, sorted) that `patterns` select, pattern by pattern, each
// pattern's matches in sorted order (a file two patterns match comes twice, as in `datasets`). A
// pattern without wildcards that matches nothing, or an absolute or ".." pattern, is a UserError
// naming `origin`; a wildcard pattern may match nothing.
std::vector<std::string> select_data_files(const std::vector<std::string>& files, const std::vector<std::string>& patterns,
                                           const std::string& origin);

struct SplitFiles {
  std::string split;
  std::vector<std::string> files;  // relative to the folder, reading order
};

// The splits of a folder holding `files` (rules 1-4 above); empty when `files` is empty.
// UserError (naming `origin`) for a shard split name that is not \w+(\.\w+)*.
std::vector<SplitFiles> infer_splits(const std::vector<std::string>& files, const std::string& origin);

// .jsonl, .json or .parquet: the formats trlhpc reads (other files take part in split inference only).
bool is_readable_data_file(std::string_view path);

}  // namespace trlhpc::dataset
