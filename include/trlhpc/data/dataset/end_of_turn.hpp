#pragma once
// The end-of-turn token of assistant turns located by content (--assistant_only_loss with a chat
// template that has no {% generation %} markers: chat_template.hpp's fallback marks only each assistant
// message's content). A model fine-tuned on content alone never learns to emit the token that ends its
// turn (<|im_end|> in ChatML, <|eot_id|> in Llama 3, <end_of_turn> in Gemma) and does not stop.
//
// The rule is TRL's definition of a trained stop token (chat_template_utils.is_chat_template_stop_token_trained):
// ignoring whitespace, an assistant span must end on an added (special) token. So after every maximal
// run of masked tokens, the tokens up to and including the first special token are marked too when all
// tokens before it decode to whitespace only; a run followed by content (or by nothing) has no
// end-of-turn token and is counted as missing. Only the first special token: in ChatML the next turn's
// <|im_start|> follows after a newline, in Llama 3 <|start_header_id|> follows <|eot_id|> directly and
// must stay untrained.
#include <cstdint>
#include <vector>

#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc::dataset {

struct EndOfTurnCount {
  int64_t marked = 0;   // assistant turns whose end-of-turn token is now trained
  int64_t missing = 0;  // assistant turns with no end-of-turn token after their content
  EndOfTurnCount& operator+=(const EndOfTurnCount& o) {
    marked += o.marked;
    missing += o.missing;
    return *this;
  }
};

// mask: (ids.size()) 1 = trained; extended in place.
EndOfTurnCount mark_end_of_turn(const std::vector<int32_t>& ids, std::vector<uint8_t>& mask,
                                const tokenizer::Tokenizer& tokenizer);

}  // namespace trlhpc::dataset
