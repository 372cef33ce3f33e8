#include "trlhpc/data/dataset/special_tokens.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc::dataset {
namespace {

void require_in_vocabulary(const tokenizer::Tokenizer& tokenizer, const std::string& tokenizer_dir,
                           const std::string& option, const std::string& token, const std::string& origin) {
  if (tokenizer.token_to_id(token)) return;
  throw UserError("--" + option + " '" + token + "'" + origin + " is not in the vocabulary of the tokenizer of " +
                  tokenizer_dir + ": give a token of its vocabulary (e.g. its eos_token '" +
                  tokenizer.eos_token().value_or("") + "'), or add the token to the tokenizer first");
}

}  // namespace

void apply_special_token_options(tokenizer::Tokenizer& tokenizer, const std::string& tokenizer_dir,
                                 const std::string& eos_token, const std::string& pad_token) {
  if (!eos_token.empty()) {
    require_in_vocabulary(tokenizer, tokenizer_dir, "eos_token", eos_token, "");
    tokenizer.set_eos_token(eos_token);
  }
  // TRL: args.pad_token or tokenizer.pad_token or tokenizer.eos_token (after the eos replacement).
  std::string pad = pad_token;
  std::string origin;
  if (pad.empty() && tokenizer.pad_token()) pad = *tokenizer.pad_token(), origin = " (the tokenizer's pad_token)";
  if (pad.empty() && tokenizer.eos_token()) pad = *tokenizer.eos_token(), origin = " (no pad_token: the eos_token pads)";
  if (pad.empty()) return;
  require_in_vocabulary(tokenizer, tokenizer_dir, "pad_token", pad, origin);
  tokenizer.set_pad_token(pad);
}

}  // namespace trlhpc::dataset
