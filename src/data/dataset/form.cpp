// Detection of a dataset's form from its first row, row validation, ShareGPT conversion and the
// pre-tokenized row -> TokenizedExample conversion (see form.hpp).
#include "trlhpc/data/dataset/form.hpp"

#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc::dataset {
namespace {

using json = nlohmann::ordered_json;

// TRL's is_conversational for one key: a list whose first element is an object with role and content.
bool is_message_list(const json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_array() || it->empty()) return false;
  const json& first = it->front();
  return first.is_object() && first.contains("role") && first.contains("content");
}

// TRL's is_conversational_from_value: "conversations" holding {"from", "value"} objects.
bool is_from_value_list(const json& row) {
  auto it = row.find("conversations");
  if (it == row.end() || !it->is_array() || it->empty()) return false;
  const json& first = it->front();
  return first.is_object() && first.contains("from") && first.contains("value");
}

std::string keys_of(const json& row) {
  std::string out;
  for (auto it = row.begin(); it != row.end(); ++it) out += (out.empty() ? "\"" : ", \"") + it.key() + "\"";
  return out.empty() ? "no keys" : "keys " + out;
}

const char* kWhatToDo =
    ". Fix the row, or pass --skip_bad_rows to skip and count rows that do not fit";

}  // namespace

const char* dataset_form_name(DatasetForm form) {
  switch (form) {
    case DatasetForm::kLanguageModeling: return "language modeling";
    case DatasetForm::kPromptCompletion: return "prompt-completion";
    case DatasetForm::kConversationalPromptCompletion: return "conversational prompt-completion";
    case DatasetForm::kConversational: return "conversational";
    case DatasetForm::kPreTokenized: return "pre-tokenized";
  }
  return "unknown";
}

DatasetFormSpec detect_dataset_form(const DatasetRow& first_row, const std::string& dataset_text_field) {
  const json& row = first_row.value;
  DatasetFormSpec spec;
  spec.text_field = dataset_text_field.empty() ? "text" : dataset_text_field;
  spec.detected_at = first_row.where();
  TRLHPC_REQUIRE(row.is_object(), first_row.where() + ": the first row is not a JSON object");

  if (row.contains("input_ids")) {
    spec.form = DatasetForm::kPreTokenized;
    spec.has_completion_mask = row.contains("completion_mask");
    spec.has_assistant_masks = row.contains("assistant_masks");
    return spec;
  }
  if (is_from_value_list(row)) {
    spec.form = DatasetForm::kConversational;
    spec.messages_field = "conversations";
    spec.from_value = true;
    return spec;
  }
  bool conversational = is_message_list(row, "messages") || is_message_list(row, "prompt") ||
                        is_message_list(row, "completion");
  if (conversational) {
    if (row.contains("prompt")) {
      TRLHPC_REQUIRE(row.contains("completion"),
                     first_row.where() + ": the row has a conversational \"prompt\" but no \"completion\"; SFT "
                                         "needs {\"prompt\": [...], \"completion\": [...]} or {\"messages\": [...]}");
      spec.form = DatasetForm::kConversationalPromptCompletion;
    } else {
      TRLHPC_REQUIRE(row.contains("messages"),
                     first_row.where() + ": the row has a conversational \"completion\" but no \"prompt\"");
      spec.form = DatasetForm::kConversational;
    }
    return spec;
  }
  if (row.contains("prompt")) {
    spec.form = DatasetForm::kPromptCompletion;
    return spec;
  }
  TRLHPC_REQUIRE(row.contains(spec.text_field),
                 first_row.where() + ": cannot tell the dataset form from the first row (" + keys_of(row) +
                     "). Expected {\"" + spec.text_field +
                     "\": ...} (set --dataset_text_field for another column), {\"prompt\", \"completion\"}, "
                     "{\"messages\": [{\"role\", \"content\"}, ...]} or pre-tokenized {\"input_ids\": [...]}");
  spec.form = DatasetForm::kLanguageModeling;
  return spec;
}

void validate_row(const DatasetFormSpec& spec, const DatasetRow& row) {
  std::string problem = row_problem(spec, row.value);
  TRLHPC_REQUIRE(problem.empty(), row.where() + ": " + problem + " (the dataset is " + dataset_form_name(spec.form) +
                                      ", detected at " + spec.detected_at + ")" + kWhatToDo);
}

void convert_to_chatml(nlohmann::ordered_json& row) {
  for (const char* key : {"prompt", "completion", "chosen", "rejected", "messages", "conversations"}) {
    auto it = row.find(key);
    if (it == row.end() || !it->is_array()) continue;
    for (auto& message : *it) {
      if (!message.is_object()) continue;
      if (auto from = message.find("from"); from != message.end()) {
        json value = std::move(*from);
        message.erase("from");
        message["role"] = std::move(value);
      }
      if (auto value_it = message.find("value"); value_it != message.end()) {
        json value = std::move(*value_it);
        message.erase("value");
        message["content"] = std::move(value);
      }
    }
  }
  if (auto it = row.find("conversations"); it != row.end()) {
    json value = std::move(*it);
    row.erase("conversations");
    row["messages"] = std::move(value);
  }
}

bool resolve_completion_only_loss(std::optional<bool> flag, const DatasetFormSpec& spec) {
  if (flag) return *flag;
  return spec.form == DatasetForm::kPromptCompletion || spec.form == DatasetForm::kConversationalPromptCompletion;
}

TokenizedExample pretokenized_example(const DatasetFormSpec& spec, const DatasetRow& row, bool completion_only_loss) {
  TRLHPC_ASSERT(spec.form == DatasetForm::kPreTokenized, "pretokenized_example on a dataset that is not pre-tokenized");
  const json& ids = row.value.at("input_ids");
  TokenizedExample example;
  example.input_ids.reserve(ids.size());
  for (const auto& id : ids) example.input_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  example.loss_mask.assign(ids.size(), 1);
  auto apply_mask = [&](const char* field) {
    const json& mask = row.value.at(field);
    for (size_t i = 0; i < mask.size(); ++i) {
      bool on = mask[i].is_boolean() ? mask[i].get<bool>() : mask[i].get<int64_t>() != 0;
      if (!on) example.loss_mask[i] = 0;
    }
  };
  if (completion_only_loss && spec.has_completion_mask) apply_mask("completion_mask");
  if (spec.has_assistant_masks) apply_mask("assistant_masks");
  return example;
}

DatasetScan scan_dataset(DatasetReader& reader, const std::string& dataset_text_field,
                         const std::function<void(const DatasetRow&, const DatasetFormSpec&)>& on_row) {
  const bool skip = reader.options().skip_bad_rows;
  DatasetScan scan;
  bool detected = false;
  DatasetRow row;
  while (reader.next(row)) {
    if (!detected) {
      try {
        scan.form = detect_dataset_form(row, dataset_text_field);
      } catch (const UserError&) {
        if (!skip) throw;
        ++scan.skipped_invalid;
        continue;
      }
      detected = true;
    }
    std::string problem = row_problem(scan.form, row.value);
    if (!problem.empty()) {
      if (!skip) validate_row(scan.form, row);
      ++scan.skipped_invalid;
      continue;
    }
    ++scan.rows;
    on_row(row, scan.form);
  }
  scan.skipped_malformed = reader.rows_skipped();
  TRLHPC_REQUIRE(scan.rows > 0, "the dataset (" + reader.files().front() +
                                    (reader.files().size() > 1 ? " and others" : "") + ") has no usable row: " +
                                    std::to_string(scan.skipped_malformed) + " malformed and " +
                                    std::to_string(scan.skipped_invalid) + " rows that fit no form were skipped");
  return scan;
}

}  // namespace trlhpc::dataset
