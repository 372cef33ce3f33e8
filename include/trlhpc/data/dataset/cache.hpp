#pragma once
// Preprocessing cache: the tokenized (and truncated, not yet packed) examples of a dataset plus its
// SftDataStats counters, stored in <cache_dir>/<hex key>.tokens so a restart or a second run does not
// re-tokenize. The key hashes everything that changes the examples:
//   - each resolved dataset file: file name, size and a digest of its bytes (not its path or mtime, so
//     a copy of the dataset on another file system hits the same entry);
//   - the tokenizer directory's tokenizer.json / vocab.json / merges.txt / tokenizer_config.json /
//     special_tokens_map.json bytes and the chat template text in use (when there is one);
//   - the options that change tokenization (split, text_field, chat_template_path, max_length, whether
//     truncation happens (packing + strategy), completion_only_loss, assistant_only_loss, skip_bad_rows)
//   - kDatasetCacheVersion.
// File layout (little-endian): "TRLHTOKC" magic, u32 version, u32 0, u64 key, u64 examples, u64 tokens,
// i64 x7 stats (rows_read, rows_skipped, examples, truncated, tokens, target_tokens, untrained_examples),
// u32 form length +
// form bytes, u64 offsets[examples + 1], i32 ids[tokens], u8 masks[tokens]. Written to a temp file and
// renamed (atomic on one file system). A file that does not validate is a miss, never a crash.
//
// sft_job: global rank 0 builds or loads the examples and writes the file; the other ranks read it
// after a broadcast (a shared file system is assumed; if their read misses they tokenize themselves).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/data/dataset/example.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"

namespace trlhpc::dataset {

inline constexpr uint32_t kDatasetCacheVersion = 5;  // 2: untrained_examples; 3: end-of-turn counts (masks changed); 4: content-keyed;
                                                     // 5: examples truncation leaves without labels dropped (TRL)

// examples + stats (packed_rows is not stored: packing runs after loading).
using DatasetCacheEntry = SftTokenizedExamples;

// The cache key of these options (reads the dataset files' metadata and the tokenizer files).
// has_tokenizer: whether a tokenizer is used (pre-tokenized datasets may run without one).
// UserError when the dataset files do not resolve.
uint64_t dataset_cache_key(const SftDataOptions& options, bool has_tokenizer);

// <cache_dir>/<16 hex digits>.tokens
std::string dataset_cache_path(const std::string& cache_dir, uint64_t key);

// Writes atomically (temp file + rename), creating cache_dir. Returns false (and fills *error) when the
// file cannot be written; never throws for I/O errors.
bool write_dataset_cache(const std::string& path, uint64_t key, const DatasetCacheEntry& entry, std::string* error = nullptr);

// The entry stored at path, or nullopt on a miss: no file (warning left empty), or a file whose magic,
// version, key or size does not check out (*warning gets a one-line reason).
std::optional<DatasetCacheEntry> read_dataset_cache(const std::string& path, uint64_t key, std::string* warning = nullptr);

}  // namespace trlhpc::dataset
