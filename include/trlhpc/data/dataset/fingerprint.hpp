#pragma once
// A digest of a prepared training dataset's content and order, for the identity a checkpoint must
// match to resume (issue 30 item 6): the counts it replaced (rows, examples, tokens) let the same rows
// in another order, or other rows of the same lengths, resume silently into a different data stream.
//
// What it covers, in order: every example's token ids and loss mask (the examples as tokenized, in
// dataset order), then every packed row's segments (example, start, length) and whether it is one
// document. So it changes with the rows' order, their text, the tokenizer's output, truncation, the
// packing (strategy, max_length, the seeded shuffle before packing) and the loss masks; it does not
// depend on where the dataset file lives or on the cache. 64 bits, not cryptographic: it tells a
// user's datasets apart, it does not resist collisions made on purpose. About 1 GB of tokens per second.
#include <string>

#include "trlhpc/data/dataset/sft_dataset.hpp"

namespace trlhpc::dataset {

// 16 hex digits.
std::string dataset_fingerprint(const SftDataset& dataset);

}  // namespace trlhpc::dataset
