#pragma once
// The forms of SFT dataset rows TRL accepts, detected per dataset from its first row as SFTTrainer does
// (trl/trainer/sft_trainer.py `_prepare_dataset`, trl/data_utils.py `is_conversational`), then checked
// row by row so a bad row is reported as "file:line: what is wrong" before any training starts.
//
//   form                               example row
//   kPreTokenized                      {"input_ids": [1, 2, 3], "completion_mask": [0, 1, 1]}   (or "assistant_masks")
//   kConversational                    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", ...}]}
//                                      ShareGPT {"conversations": [{"from": "user", "value": "Hi"}, ...]} too
//   kConversationalPromptCompletion    {"prompt": [{"role": "user", ...}], "completion": [{"role": "assistant", ...}]}
//   kPromptCompletion                  {"prompt": "The sky is", "completion": " blue."}
//   kLanguageModeling                  {"text": "..."}   (field name from --dataset_text_field)
//
// Detection order is TRL's: an "input_ids" key means pre-tokenized; then ShareGPT from/value; then a
// message list under "prompt"/"completion"/"messages" means conversational; then "prompt" means
// prompt-completion; otherwise language modeling. Message roles must be one of system, user, assistant,
// tool, developer; content a string (null allowed with "tool_calls"; a list of {"type": "text", "text"}
// blocks allowed).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trlhpc/data/dataset/example.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {

enum class DatasetForm {
  kLanguageModeling,
  kPromptCompletion,
  kConversationalPromptCompletion,
  kConversational,
  kPreTokenized,
};

// "language modeling", "prompt-completion", ... for messages.
const char* dataset_form_name(DatasetForm form);

struct DatasetFormSpec {
  DatasetForm form = DatasetForm::kLanguageModeling;
  std::string text_field = "text";          // kLanguageModeling: the text column
  std::string messages_field = "messages";  // kConversational: "messages", or "conversations" for ShareGPT
  bool from_value = false;                  // kConversational: ShareGPT keys from/value (see convert_to_chatml)
  bool has_completion_mask = false;         // kPreTokenized: rows carry "completion_mask"
  bool has_assistant_masks = false;         // kPreTokenized: rows carry "assistant_masks"
  std::string detected_at;                  // "file:line" of the row the form was read from

  // True for the forms whose rows are message lists (rendered by a chat template).
  bool conversational() const {
    return form == DatasetForm::kConversational || form == DatasetForm::kConversationalPromptCompletion;
  }
};

// The form of a dataset from its first row. UserError naming the row when it fits no form.
DatasetFormSpec detect_dataset_form(const DatasetRow& first_row, const std::string& dataset_text_field = "text");

// Why `row` does not fit `spec` ("" when it fits): missing field, wrong type, unknown role, bad mask.
std::string row_problem(const DatasetFormSpec& spec, const nlohmann::ordered_json& row);

// UserError "file:line: <problem>. Fix the row or pass --skip_bad_rows ..." when the row does not fit.
void validate_row(const DatasetFormSpec& spec, const DatasetRow& row);

// ShareGPT -> ChatML in place, as TRL's maybe_convert_to_chatml: message keys from/value become
// role/content, and "conversations" becomes "messages". A no-op on other rows.
void convert_to_chatml(nlohmann::ordered_json& row);

// TRL's completion_only_loss default: the flag when given, else true exactly for prompt-completion forms.
bool resolve_completion_only_loss(std::optional<bool> flag, const DatasetFormSpec& spec);

// A pre-tokenized row as a TokenizedExample. loss_mask = 1, then AND completion_mask when
// `completion_only_loss`, then AND assistant_masks when present (TRL's collator applies assistant_masks
// whenever the column exists). The row must have passed validate_row.
TokenizedExample pretokenized_example(const DatasetFormSpec& spec, const DatasetRow& row, bool completion_only_loss);

// Result of scan_dataset.
struct DatasetScan {
  DatasetFormSpec form;
  int64_t rows = 0;               // rows handed to the callback
  int64_t skipped_malformed = 0;  // not JSON objects (skip_bad_rows)
  int64_t skipped_invalid = 0;    // JSON objects that do not fit the form (skip_bad_rows)
};

// Streams every row of `reader`: detects the form from the first good row, validates each row and calls
// on_row(row, form) for those that fit. With the reader's skip_bad_rows, rows that do not fit (including
// leading rows from which no form can be detected) are counted instead of failing. UserError when no row
// is left.
DatasetScan scan_dataset(DatasetReader& reader, const std::string& dataset_text_field,
                         const std::function<void(const DatasetRow&, const DatasetFormSpec&)>& on_row);

}  // namespace trlhpc::dataset
