// Per-row checks for each dataset form: row_problem says in words what does not fit.
#include <array>
#include <limits>
#include <string>

#include "trlhpc/data/dataset/form.hpp"

namespace trlhpc::dataset {
namespace {

using json = nlohmann::ordered_json;

constexpr std::array<const char*, 5> kAllowedRoles = {"system", "user", "assistant", "tool", "developer"};

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string type_of(const json& v) { return v.type_name(); }

// Problem with one message ("" if fine). `number` is 1-based for the message.
std::string message_problem(const json& message, const std::string& field, size_t number, bool from_value) {
  const std::string role_key = from_value ? "from" : "role";
  const std::string content_key = from_value ? "value" : "content";
  const std::string which = "message " + std::to_string(number) + " of " + quoted(field);
  if (!message.is_object()) return which + " is a " + type_of(message) + ", not an object";
  auto role = message.find(role_key);
  if (role == message.end()) return which + " has no " + quoted(role_key) + " key";
  if (!role->is_string()) return which + " has a " + type_of(*role) + " " + quoted(role_key) + ", not a string";
  const std::string& name = role->get_ref<const std::string&>();
  bool known = false;
  for (const char* allowed : kAllowedRoles) known |= name == allowed;
  if (!known)
    return which + " has role " + quoted(name) + "; allowed roles are system, user, assistant, tool, developer";

  auto content = message.find(content_key);
  bool has_tool_calls = message.contains("tool_calls");
  if (content == message.end() || content->is_null()) {
    if (has_tool_calls) return "";
    return which + " has no " + quoted(content_key) + " (only a message with \"tool_calls\" may omit it)";
  }
  if (content->is_string()) return "";
  if (content->is_array()) {
    for (const auto& block : *content) {
      bool text_block = block.is_object() && block.value("type", std::string()) == "text" &&
                        block.contains("text") && block["text"].is_string();
      if (!text_block)
        return which + " has a content list with a block that is not {\"type\": \"text\", \"text\": \"...\"}";
    }
    return "";
  }
  return which + " has a " + type_of(*content) + " " + quoted(content_key) + ", not a string";
}

std::string messages_problem(const json& row, const std::string& field, bool from_value) {
  auto it = row.find(field);
  if (it == row.end()) return "the row has no " + quoted(field) + " field";
  if (!it->is_array() || it->empty())
    return quoted(field) + " must be a non-empty list of {\"role\", \"content\"} messages, not " +
           (it->is_array() ? std::string("an empty list") : "a " + type_of(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    std::string problem = message_problem((*it)[i], field, i + 1, from_value);
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string string_field_problem(const json& row, const std::string& field) {
  auto it = row.find(field);
  if (it == row.end()) return "the row has no " + quoted(field) + " field";
  if (!it->is_string()) return quoted(field) + " is a " + type_of(*it) + ", not a string";
  return "";
}

// The template inputs of a conversational row besides its messages (TRL's tokenize_fn): `tools`, a list
// or its JSON text, and `chat_template_kwargs`, an object of template variables.
std::string tools_problem(const json& row) {
  auto it = row.find("tools");
  if (it != row.end() && !it->is_null() && !it->is_array()) {
    if (!it->is_string()) return "\"tools\" is a " + type_of(*it) + "; it must be a list of tool schemas or a JSON string of one";
    const json parsed = json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_array() && !parsed.is_null())
      return "\"tools\" is a string that is not the JSON text of a list of tool schemas";
  }
  auto kwargs = row.find("chat_template_kwargs");
  if (kwargs != row.end() && !kwargs->is_null() && !kwargs->is_object())
    return "\"chat_template_kwargs\" is a " + type_of(*kwargs) +
           "; it must be an object of chat template variables, e.g. {\"enable_thinking\": false}";
  return "";
}

// Token ids: integers in [0, 2^31).
std::string ids_problem(const json& row) {
  auto it = row.find("input_ids");
  if (it == row.end()) return "the row has no \"input_ids\" field";
  if (!it->is_array()) return "\"input_ids\" is a " + type_of(*it) + ", not a list of token ids";
  for (size_t i = 0; i < it->size(); ++i) {
    const json& id = (*it)[i];
    constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
    bool ok = id.is_number_unsigned() ? id.get<uint64_t>() <= static_cast<uint64_t>(kMaxId)
                                      : id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= kMaxId;
    if (!ok) return "\"input_ids\"[" + std::to_string(i) + "] = " + id.dump() + " is not a token id (an integer >= 0)";
  }
  return "";
}

std::string mask_problem(const json& row, const std::string& field, size_t length) {
  auto it = row.find(field);
  if (it == row.end()) return "the row has no " + quoted(field) + " field (the first row had one)";
  if (!it->is_array()) return quoted(field) + " is a " + type_of(*it) + ", not a list of 0/1";
  if (it->size() != length)
    return quoted(field) + " has " + std::to_string(it->size()) + " entries but \"input_ids\" has " +
           std::to_string(length);
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    bool ok = m.is_boolean() || (m.is_number_integer() && (m.get<int64_t>() == 0 || m.get<int64_t>() == 1));
    if (!ok) return quoted(field) + "[" + std::to_string(i) + "] = " + m.dump() + " is not 0 or 1";
  }
  return "";
}

}  // namespace

std::string row_problem(const DatasetFormSpec& spec, const nlohmann::ordered_json& row) {
  if (!row.is_object()) return "the row is a " + type_of(row) + ", not a JSON object";
  std::string problem;
  switch (spec.form) {
    case DatasetForm::kPreTokenized:
      problem = ids_problem(row);
      if (problem.empty() && spec.has_completion_mask)
        problem = mask_problem(row, "completion_mask", row["input_ids"].size());
      if (problem.empty() && spec.has_assistant_masks)
        problem = mask_problem(row, "assistant_masks", row["input_ids"].size());
      return problem;
    case DatasetForm::kConversational:
      problem = messages_problem(row, spec.messages_field, spec.from_value);
      return problem.empty() ? tools_problem(row) : problem;
    case DatasetForm::kConversationalPromptCompletion:
      problem = messages_problem(row, "prompt", false);
      if (problem.empty()) problem = messages_problem(row, "completion", false);
      return problem.empty() ? tools_problem(row) : problem;
    case DatasetForm::kPromptCompletion:
      problem = string_field_problem(row, "prompt");
      return problem.empty() ? string_field_problem(row, "completion") : problem;
    case DatasetForm::kLanguageModeling:
      return string_field_problem(row, spec.text_field);
  }
  return "unknown dataset form";
}

}  // namespace trlhpc::dataset
