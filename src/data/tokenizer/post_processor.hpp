#pragma once
// Post-processors of tokenizer.json ("post_processor") for single sequences: TemplateProcessing
// ("<s> $A", "$A </s>", ...), RobertaProcessing and BertProcessing (cls $A sep), ByteLevel (ids
// unchanged) and Sequence. With add_special_tokens=false nothing is added, as in the library.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trlhpc::tokenizer::detail {

// The ids a post-processor puts around the encoded sequence $A.
struct SpecialTokenFrame {
  std::vector<int32_t> before;
  std::vector<int32_t> after;
};


// The frame of `spec` (a tokenizer.json "post_processor" object; null gives an empty frame).
// `where` names the file for error messages.
SpecialTokenFrame make_special_token_frame(const nlohmann::json& spec, const std::string& where);

// The frame transformers' update_post_processor builds: "[bos] $A [eos]".
SpecialTokenFrame bos_eos_frame(int32_t bos_id, bool add_bos, int32_t eos_id, bool add_eos);

}  // namespace trlhpc::tokenizer::detail
