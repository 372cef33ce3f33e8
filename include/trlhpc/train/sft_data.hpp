#pragma once
// The data of a `trlhpc sft` run: the tokenizer and the train / eval datasets, read through the
// preprocessing cache (data/dataset/cache.hpp) so that one rank tokenizes and the others read its file.
#include <functional>
#include <optional>
#include <string>

#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/train/sft_config.hpp"
#include "trlhpc/train/sft_plan.hpp"

namespace trlhpc {

class Communicator;
class MetricsLogger;

// The tokenizer of `dir` when it holds tokenizer files (tokenizer.json or vocab.json), else none
// (pre-tokenized datasets need none).
std::optional<tokenizer::Tokenizer> load_tokenizer(const std::string& dir);
// UserError naming `dir` when the tokenizer has more tokens than the model's embedding has rows.
void require_tokenizer_fits_model(const tokenizer::Tokenizer& tokenizer, const std::string& dir, int64_t vocab_size);

// Which of a run's datasets.
enum class DatasetRole { kTrain, kEval };

// True when the run evaluates: --eval_dataset given, or --eval_strategy other than "no" (TRL passes
// dataset[dataset_test_split] as eval_dataset exactly then).
bool evaluates(const SftConfig& config);

// What a role reads, as TRL's sft.py builds it:
//   train: the `datasets:` mixture of --config (train side of test_split_size), else --dataset_name
//          (--dataset_config) at --dataset_train_split;
//   eval:  --eval_dataset (its --dataset_test_split split, or its only split), else the mixture's test
//          side (needs test_split_size), else --dataset_name at --dataset_test_split.
dataset::DatasetSource dataset_source(const SftConfig& config, DatasetRole role);

// The dataset of `role` as the config's options prepare it. Collective
// over `world`: its rank 0 loads the examples from the cache or tokenizes them and writes the cache
// file, then broadcasts a status (and the error text when it failed, so every rank raises the same
// error and none hangs); the other ranks read the file rank 0 names (shared file system) and tokenize
// themselves only if that read misses. Packing then runs on every rank: identical rows everywhere.
// plan.cache_dir "none": every rank tokenizes itself.
// `interrupted` (this rank's preemption flag) is asked while tokenizing; nullopt when it stopped the
// tokenizing, on this rank or (through the cache outcome) on rank 0. Every rank makes the same
// collective calls either way, so the caller can then agree on the signal.
std::optional<dataset::SftDataset> load_sft_dataset(const SftConfig& config, const SftPlan& plan,
                                                    DatasetRole role,
                                                    const tokenizer::Tokenizer* tokenizer, Communicator& world,
                                                    MetricsLogger& logger, const std::function<bool()>& interrupted);

}  // namespace trlhpc
