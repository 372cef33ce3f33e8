#include "trlhpc/train/sft_data.hpp"

#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/data/dataset/cache.hpp"
#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/comm/root_action.hpp"
#include "trlhpc/train/metrics_logger.hpp"

namespace trlhpc {
namespace {

std::optional<bool> tri_state(const std::string& value, const char* option) {
  if (value == "auto" || value.empty()) return std::nullopt;
  if (value == "true" || value == "1" || value == "True") return true;
  if (value == "false" || value == "0" || value == "False") return false;
  throw UserError(std::string("--") + option + " " + value + ": use true, false or auto");
}

dataset::DatasetEntry named_entry(const std::string& path, const std::string& name, const std::string& split,
                                  const std::string& origin, const std::string& split_option) {
  dataset::DatasetEntry e;
  e.path = path;
  e.name = name;
  e.split = split;
  e.origin = origin;
  e.split_option = split_option;
  return e;
}

// How the dataset of a role is named in messages.
std::string dataset_label(const SftConfig& c, DatasetRole role) {
  if (role == DatasetRole::kEval && !c.eval_dataset.empty()) return c.eval_dataset;
  if (!c.datasets.empty())
    return "mixture of " + std::to_string(c.datasets.size()) + " datasets (" + c.datasets_config_file + ")" +
           (role == DatasetRole::kEval ? ", test side" : "");
  return c.dataset_name + (role == DatasetRole::kEval ? " (" + c.dataset_test_split + ")" : "");
}

dataset::SftDataOptions data_options(const SftConfig& c, DatasetRole role, const std::string& tokenizer_dir) {
  dataset::SftDataOptions o;
  o.dataset_name = dataset_label(c, role);
  o.source = dataset_source(c, role);
  o.text_field = c.dataset_text_field;
  o.tokenizer_dir = tokenizer_dir;
  o.chat_template_path = c.chat_template_path;
  o.chat_template_kwargs = chat_template::parse_chat_template_kwargs(c.chat_template_kwargs, "--chat_template_kwargs");
  o.max_length = c.max_length;
  o.truncation_mode = batching::parse_truncation_mode(c.truncation_mode);
  o.eos_token = c.eos_token;
  o.pad_token = c.pad_token;
  o.num_proc = c.dataset_num_proc;
  o.packing = c.packing;
  o.packing_strategy = c.packing_strategy;
  o.padding_free = c.padding_free;
  o.pad_to_multiple_of = c.pad_to_multiple_of;
  o.completion_only_loss = tri_state(c.completion_only_loss, "completion_only_loss");
  o.assistant_only_loss = c.assistant_only_loss;
  o.skip_bad_rows = c.skip_bad_rows;
  o.shuffle = c.shuffle_dataset;
  o.seed = c.seed;
  return o;
}

// What rank 0 found, for every rank: where the cache file is (empty: none was written) and its key,
// or the error that every rank must raise.
struct CacheOutcome {
  enum Status : int32_t { kOk = 0, kUserError = 1, kOtherError = 2, kInterrupted = 3 };
  int32_t status = kOk;
  std::string error, path;
  uint64_t key = 0;
};

// Rank 0's part: the examples from the cache, or tokenized and written to it.
std::optional<dataset::SftTokenizedExamples> load_or_tokenize(const dataset::SftDataOptions& o,
                                                              const tokenizer::Tokenizer* tokenizer,
                                                              const std::string& cache_dir, MetricsLogger& logger,
                                                              CacheOutcome& outcome) {
  try {
    outcome.key = dataset::dataset_cache_key(o, tokenizer != nullptr);
    const std::string candidate = dataset::dataset_cache_path(cache_dir, outcome.key);
    std::string warning;
    std::optional<dataset::SftTokenizedExamples> tokenized = dataset::read_dataset_cache(candidate, outcome.key, &warning);
    if (!warning.empty()) logger.message(warning);
    if (tokenized) {
      outcome.path = candidate;
      logger.message("dataset cache hit: " + candidate);
      return tokenized;
    }
    tokenized = dataset::SftDataset::tokenize(o, tokenizer);
    std::string write_error;
    if (dataset::write_dataset_cache(candidate, outcome.key, *tokenized, &write_error)) {
      outcome.path = candidate;
      logger.message("dataset cache written: " + candidate);
    } else {
      logger.message("dataset cache not written (" + write_error + "); every rank tokenizes");
    }
    return tokenized;
  } catch (const dataset::TokenizationInterrupted&) {
    outcome.status = CacheOutcome::kInterrupted;
  } catch (const UserError& e) {
    outcome.status = CacheOutcome::kUserError;
    outcome.error = e.what();
  } catch (const std::exception& e) {
    outcome.status = CacheOutcome::kOtherError;
    outcome.error = e.what();
  }
  return std::nullopt;
}

// Rank 0's outcome on every rank; rethrows its error everywhere.
void share_outcome(Communicator& world, CacheOutcome& outcome) {
  world.broadcast(std::span<int32_t>(&outcome.status, 1), 0);
  if (outcome.status == CacheOutcome::kInterrupted) return;
  if (outcome.status != CacheOutcome::kOk) {
    broadcast_text(world, outcome.error);
    if (outcome.status == CacheOutcome::kUserError) throw UserError(outcome.error);
    throw std::runtime_error(outcome.error);
  }
  broadcast_text(world, outcome.path);
  int64_t key = 0;  // the Communicator carries signed 64-bit integers: the key's bits travel unchanged
  std::memcpy(&key, &outcome.key, sizeof key);
  world.broadcast(std::span<int64_t>(&key, 1), 0);
  std::memcpy(&outcome.key, &key, sizeof key);
}

}  // namespace

bool evaluates(const SftConfig& c) { return !c.eval_dataset.empty() || c.eval_strategy != "no"; }

dataset::DatasetSource dataset_source(const SftConfig& c, DatasetRole role) {
  dataset::DatasetSource source;
  const bool eval = role == DatasetRole::kEval;
  if (eval && !c.eval_dataset.empty()) {
    dataset::DatasetEntry e = named_entry(c.eval_dataset, "", c.dataset_test_split, "--eval_dataset " + c.eval_dataset,
                                          "--dataset_test_split");
    e.single_split_fallback = true;
    source.entries.push_back(std::move(e));
    return source;
  }
  if (!c.datasets.empty()) {
    source.entries = c.datasets;
    source.origin = c.datasets_config_file + ": datasets";
    if (c.test_split_size > 0) {
      source.test_split_size = c.test_split_size;
      source.test_side = eval;
    } else if (eval) {
      throw UserError("--eval_strategy " + c.eval_strategy + " evaluates on the test split, but the datasets: mixture of " +
                      c.datasets_config_file + " has none: set test_split_size (e.g. 0.05) in that file, pass "
                      "--eval_dataset PATH, or --eval_strategy no");
    }
    return source;
  }
  source.entries.push_back(eval ? named_entry(c.dataset_name, c.dataset_config, c.dataset_test_split,
                                              "--dataset_name " + c.dataset_name, "--dataset_test_split")
                                : named_entry(c.dataset_name, c.dataset_config, c.dataset_train_split,
                                              "--dataset_name " + c.dataset_name, "--dataset_train_split"));
  if (eval)
    source.entries.back().missing_split_hint = "--eval_strategy " + c.eval_strategy +
                                               " evaluates on it: pass --eval_dataset PATH, or --eval_strategy no";
  return source;
}

std::optional<tokenizer::Tokenizer> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty() || (!fs::exists(fs::path(dir) / "tokenizer.json") && !fs::exists(fs::path(dir) / "vocab.json")))
    return std::nullopt;
  return tokenizer::Tokenizer::from_directory(dir);
}

void require_tokenizer_fits_model(const tokenizer::Tokenizer& tokenizer, const std::string& dir, int64_t vocab_size) {
  // len(tokenizer) may be below the model's vocab_size (Qwen2 pads its embedding table), never above:
  // the ids past it have no embedding row.
  if (tokenizer.vocab_size() > vocab_size)
    throw UserError("the tokenizer of " + dir + " has " + std::to_string(tokenizer.vocab_size()) +
                    " tokens but the model's vocab_size is " + std::to_string(vocab_size) +
                    ": its ids past " + std::to_string(vocab_size - 1) +
                    " have no embedding; use the model's own tokenizer (--tokenizer)");
}

std::optional<dataset::SftDataset> load_sft_dataset(const SftConfig& config, const SftPlan& plan,
                                                    DatasetRole role,
                                                    const tokenizer::Tokenizer* tokenizer, Communicator& world,
                                                    MetricsLogger& logger, const std::function<bool()>& interrupted) {
  dataset::SftDataOptions o = data_options(config, role, plan.tokenizer_dir);
  o.interrupted = interrupted;
  o.vocab_size = plan.model.vocab_size;
  try {
    if (plan.cache_dir == "none") return dataset::SftDataset::build(o, tokenizer);
  } catch (const dataset::TokenizationInterrupted&) {
    return std::nullopt;
  }
  CacheOutcome outcome;
  std::optional<dataset::SftTokenizedExamples> tokenized;
  if (world.rank() == 0) tokenized = load_or_tokenize(o, tokenizer, plan.cache_dir, logger, outcome);
  share_outcome(world, outcome);
  if (outcome.status == CacheOutcome::kInterrupted) return std::nullopt;
  if (world.rank() != 0) {
    if (!outcome.path.empty()) {
      std::string warning;
      tokenized = dataset::read_dataset_cache(outcome.path, outcome.key, &warning);
      if (!tokenized)
        std::cerr << "rank " << world.rank() << ": "
                  << (warning.empty() ? "dataset cache " + outcome.path + " not readable; tokenizing" : warning) << "\n";
    }
    try {
      if (!tokenized) tokenized = dataset::SftDataset::tokenize(o, tokenizer);
    } catch (const dataset::TokenizationInterrupted&) {
      return std::nullopt;
    }
  }
  return dataset::SftDataset::from_examples(o, std::move(*tokenized), tokenizer);
}

}  // namespace trlhpc
