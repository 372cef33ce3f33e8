#include "post_processor.hpp"

#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// TemplateProcessing "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, ...],
// where each special token's ids come from "special_tokens": {"<s>": {"ids": [1], ...}}.
void add_template(const nlohmann::json& spec, const std::string& where, SpecialTokenFrame& frame) {
  const nlohmann::json& single = required_array(spec, "single", where);
  const nlohmann::json& special_tokens = spec.contains("special_tokens") ? spec["special_tokens"] : nlohmann::json::object();
  bool seen_sequence = false;
  for (const auto& item : single) {
    if (item.contains("Sequence")) {
      TRLHPC_REQUIRE(!seen_sequence, where + ": TemplateProcessing \"single\" uses $A twice");
      seen_sequence = true;
      continue;
    }
    TRLHPC_REQUIRE(item.contains("SpecialToken"), where + ": TemplateProcessing item " + item.dump() +
                                                      " is neither a SpecialToken nor a Sequence");
    const std::string name = required_string(item["SpecialToken"], "id", where + " TemplateProcessing");
    TRLHPC_REQUIRE(special_tokens.contains(name), where + ": TemplateProcessing uses \"" + name +
                                                      "\" which is not listed in its special_tokens");
    const nlohmann::json& ids = required_array(special_tokens[name], "ids", where + " special_tokens." + name);
    for (const auto& id : ids) {
      TRLHPC_REQUIRE(id.is_number_integer(), where + ": special_tokens." + name + ".ids must be integers");
      (seen_sequence ? frame.after : frame.before).push_back(id.get<int32_t>());
    }
  }
  TRLHPC_REQUIRE(seen_sequence, where + ": TemplateProcessing \"single\" has no $A sequence");
}

// RobertaProcessing / BertProcessing: "cls": ["<s>", 0], "sep": ["</s>", 2].
int32_t pair_id(const nlohmann::json& spec, const char* key, const std::string& where) {
  const nlohmann::json& value = required_field(spec, key, where);
  TRLHPC_REQUIRE(value.is_array() && value.size() == 2 && value[1].is_number_integer(),
                 where + ": \"" + key + "\" must be [token, id]");
  return value[1].get<int32_t>();
}

void add_frame(const nlohmann::json& spec, const std::string& where, SpecialTokenFrame& frame) {
  if (spec.is_null()) return;
  const std::string type = required_string(spec, "type", where + " post_processor");
  if (type == "TemplateProcessing") {
    SpecialTokenFrame inner;
    add_template(spec, where + " TemplateProcessing", inner);
    frame.before.insert(frame.before.begin(), inner.before.begin(), inner.before.end());
    frame.after.insert(frame.after.end(), inner.after.begin(), inner.after.end());
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    frame.before.insert(frame.before.begin(), pair_id(spec, "cls", where + " " + type));
    frame.after.push_back(pair_id(spec, "sep", where + " " + type));
  } else if (type == "ByteLevel") {
    // Only trims offsets; the ids are unchanged.
  } else if (type == "Sequence") {
    for (const auto& step : required_array(spec, "processors", where + " Sequence post_processor"))
      add_frame(step, where, frame);
  } else {
    throw_user_error(where + ": post_processor type \"" + type + "\" is not supported (trlhpc supports " +
                     "TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel and Sequence)");
  }
}

}  // namespace

SpecialTokenFrame make_special_token_frame(const nlohmann::json& spec, const std::string& where) {
  SpecialTokenFrame frame;
  add_frame(spec, where, frame);
  return frame;
}

SpecialTokenFrame bos_eos_frame(int32_t bos_id, bool add_bos, int32_t eos_id, bool add_eos) {
  SpecialTokenFrame frame;
  if (add_bos && bos_id >= 0) frame.before.push_back(bos_id);
  if (add_eos && eos_id >= 0) frame.after.push_back(eos_id);
  return frame;
}

}  // namespace trlhpc::tokenizer::detail
