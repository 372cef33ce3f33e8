#pragma once
// TRL's dataset_num_proc: the rows of a dataset tokenized on several threads (TRL maps them on
// several processes). Each row is tokenized by a pure function of the row (RowTokenizer is safe to
// share: the tokenizer's word cache locks, the chat template is immutable once parsed), results are put
// back in row order and the first failing row's error, in row order, is the one raised, so the
// examples, their order and the error are those of one thread.
#include <cstdint>
#include <vector>

#include "trlhpc/data/dataset/example.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {

class RowTokenizer;

// tokenizer.tokenize(rows[i]) for every i, on min(threads, rows.size()) threads (1: this thread).
std::vector<TokenizedExample> tokenize_rows_in_order(const RowTokenizer& tokenizer, const std::vector<DatasetRow>& rows,
                                                     int64_t threads);

// Rows handed to the threads at once (each thread gets every threads-th of them): enough for the
// threads to stay busy, few enough that the reader is not far ahead of the tokenizing.
inline constexpr int64_t kRowsPerThreadBatch = 64;

}  // namespace trlhpc::dataset
