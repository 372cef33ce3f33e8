#pragma once
// SftDataset: a dataset file turned into exactly the token rows TRL's SFTTrainer trains on.
//
//   rows (dataset_reader) -> form detection (dataset_form) -> per-form tokenization as TRL does it:
//     language modeling     encode(text + eos unless it ends with eos), loss on every token
//     prompt-completion     ids = encode(prompt + completion [+ eos]); completion_mask marks the
//                           tokens past encode(prompt) (TRL tokenizes the concatenation, not the parts)
//     conversational        chat template -> encode(text, no special tokens); assistant_only_loss marks
//                           the tokens overlapping assistant bytes (generation blocks, else content spans)
//     conv. prompt-compl.   prompt rendered with add_generation_prompt, completion mask past it
//     pre-tokenized         input_ids with completion_mask / assistant_masks
//   -> truncation to max_length (keep_start or keep_end; packing: keep_start, as TRL's packer) -> packing
//      (bfd | wrapped) or one row per example
//   -> collate(row indices) -> Batch (targets shifted within documents).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/data/batching/packing.hpp"
#include "trlhpc/data/dataset/dataset_source.hpp"
#include "trlhpc/data/dataset/end_of_turn.hpp"
#include "trlhpc/data/dataset/example.hpp"
#include "trlhpc/data/dataset/form.hpp"

namespace trlhpc::tokenizer {
class Tokenizer;
}

namespace trlhpc::dataset {

struct SftDataOptions {
  std::string dataset_name;        // names the dataset in messages; read as (dataset_name, split) unless `source` is set
  std::string split = "train";
  // What to read when it has entries: load_dataset entries concatenated, optionally one side of a
  // train/test cut (dataset_source.hpp), e.g. TRL's `datasets:` mixture or --dataset_test_split.
  DatasetSource source;
  std::string text_field = "text";
  std::string tokenizer_dir;       // for the chat template and special tokens
  std::string chat_template_path;  // overrides the tokenizer's template
  // Template variables for every row (--chat_template_kwargs, e.g. {"enable_thinking": false}); a row's
  // own `chat_template_kwargs` column wins key by key (chat_template/template_kwargs.hpp). Part of the cache key.
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  int64_t max_length = 1024;
  // TRL's truncation_mode: which end of a row longer than max_length is kept. TRL 1.16 truncates this way
  // only without packing; its packer cuts every sequence keep_start whatever the mode.
  batching::TruncationMode truncation_mode = batching::TruncationMode::kKeepStart;
  // TRL's eos_token / pad_token as given (empty: unset), already applied to the tokenizer
  // (special_tokens.hpp). Here for the chat template's eos_token / pad_token and the cache key.
  std::string eos_token, pad_token;
  // TRL's dataset_num_proc: rows are tokenized on this many threads; the examples (and so the cache
  // file) are the same for every value. Not part of the cache key.
  int64_t num_proc = 1;
  bool packing = false;
  std::string packing_strategy = "bfd";
  bool padding_free = false;
  int64_t pad_to_multiple_of = 0;
  std::optional<bool> completion_only_loss;  // unset: TRL's default for the form
  bool assistant_only_loss = false;
  bool skip_bad_rows = false;
  bool shuffle = true;  // --shuffle_dataset: seeded shuffle of the examples before packing
  uint64_t seed = 42;
  // The model's vocabulary (config.json vocab_size): every token id of every example must be below it,
  // else a UserError naming the file and row (a pre-tokenized id past the embedding table trained on
  // garbage, or failed inside a kernel as a target). 0: not checked. Part of the cache key.
  int64_t vocab_size = 0;
  // Asked before the first row and every kInterruptCheckRows rows while tokenizing; true stops with TokenizationInterrupted
  // (a preemption signal: tokenizing a large dataset can outlast the scheduler's grace period). Not
  // part of the cache key. Empty: never interrupted.
  std::function<bool()> interrupted;
};

inline constexpr int64_t kInterruptCheckRows = 256;

// The source options read: `source`, or the one entry (dataset_name, split) when it has none.
DatasetSource effective_source(const SftDataOptions& options);

// Thrown by tokenize (and build) when options.interrupted() said so.
struct TokenizationInterrupted : std::runtime_error {
  TokenizationInterrupted() : std::runtime_error("tokenization interrupted") {}
};

struct SftDataStats {
  int64_t rows_read = 0, rows_skipped = 0, examples = 0, truncated = 0;
  int64_t tokens = 0, target_tokens = 0, packed_rows = 0;
  // Examples (after truncation) with no trained token: every loss_mask entry past the first is 0
  // (the first token of a document is never a target). They add context only when packed.
  int64_t untrained_examples = 0;
  // --assistant_only_loss with a template without {% generation %}: assistant turns whose end-of-turn
  // token was added to the loss mask, and those that had none (end_of_turn.hpp).
  EndOfTurnCount end_of_turn;
  std::string form;
};

// The examples of a dataset after tokenization and truncation, before packing (what the dataset cache
// stores), with the counters known at that point (packed_rows stays 0).
struct SftTokenizedExamples {
  std::vector<TokenizedExample> examples;
  SftDataStats stats;
};

class SftDataset {
 public:
  // tokenizer may be null only for pre-tokenized datasets. build = from_examples(tokenize(...)).
  static SftDataset build(const SftDataOptions& options, const tokenizer::Tokenizer* tokenizer);
  // Reads and tokenizes (with truncation); UserError when no non-empty example comes out, or when no
  // example has a trained token (the message names the mask that removed them all).
  static SftTokenizedExamples tokenize(const SftDataOptions& options, const tokenizer::Tokenizer* tokenizer);
  // Packing and collate set-up over already tokenized examples (deterministic: same rows on every rank).
  static SftDataset from_examples(const SftDataOptions& options, SftTokenizedExamples tokenized,
                                  const tokenizer::Tokenizer* tokenizer);

  const std::vector<TokenizedExample>& examples() const { return examples_; }
  const std::vector<batching::PackedRow>& rows() const { return rows_; }
  int64_t num_rows() const { return static_cast<int64_t>(rows_.size()); }
  const SftDataStats& stats() const { return stats_; }
  // The micro-batch of the given row indices.
  Batch collate(std::span<const int64_t> row_indices) const;

 private:
  std::vector<TokenizedExample> examples_;
  std::vector<batching::PackedRow> rows_;
  batching::CollateOptions collate_;
  SftDataStats stats_;
};

// One dataset row as TRL would tokenize it (exposed for `trlhpc tokenize` and tests).
class RowTokenizer {
 public:
  RowTokenizer(const SftDataOptions& options, const DatasetFormSpec& form, const tokenizer::Tokenizer* tokenizer);
  ~RowTokenizer();
  // A chat-template failure is a UserError naming the row and the template's file.
  TokenizedExample tokenize(const DatasetRow& row) const;
  // The rendered text of a conversational row (empty for other forms).
  std::string rendered_text(const DatasetRow& row) const;
  // Why an example of this dataset can train no token under these options (the loss masks in use),
  // for the error raised when none of the dataset's examples trains one.
  std::string untrained_cause() const;
  // End-of-turn tokens marked so far (assistant turns located by content only).
  EndOfTurnCount end_of_turn() const;

 private:
  TokenizedExample tokenize_row(const DatasetRow& row) const;

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trlhpc::dataset
