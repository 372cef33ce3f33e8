#pragma once
// TRL's SFTConfig eos_token and pad_token (TRL 1.16 SFTTrainer.__init__, read, not copied):
//   eos_token  replaces tokenizer.eos_token before the dataset is prepared: the string appended to
//              language-modeling texts and prompt-completion completions that do not already end with it,
//              and the `eos_token` a chat template renders. ValueError when it is not in get_vocab().
//   pad_token  the collator's padding id is that of pad_token, else the tokenizer's pad token, else its
//              (possibly replaced) eos token; whichever is chosen must be in the vocabulary, and becomes
//              tokenizer.pad_token (a chat template's `pad_token` too).
// Neither adds a token: the string keeps tokenizing as it did (transformers' setters add nothing).
#include <string>

namespace trlhpc::tokenizer {
class Tokenizer;
}

namespace trlhpc::dataset {

// Applies both to `tokenizer` (loaded from `tokenizer_dir`, named in messages); empty means unset.
// UserError naming --eos_token / --pad_token and the token when it is not in the vocabulary.
void apply_special_token_options(tokenizer::Tokenizer& tokenizer, const std::string& tokenizer_dir,
                                 const std::string& eos_token, const std::string& pad_token);

}  // namespace trlhpc::dataset
