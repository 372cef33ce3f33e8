#pragma once
// The parts of a loaded Tokenizer (private to src/data/tokenizer). loader.cpp fills it from the
// files of a tokenizer directory; tokenizer.cpp runs the encode/decode pipeline over it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "added_tokens.hpp"
#include "bpe_model.hpp"
#include "normalizer.hpp"
#include "post_processor.hpp"
#include "pre_tokenizer.hpp"
#include "tokenizer_decoder.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc::tokenizer {

class Tokenizer::Impl {
 public:
  std::string source;  // the directory, for messages
  std::unique_ptr<detail::Normalizer> normalizer;
  std::unique_ptr<detail::PreTokenizer> pre_tokenizer;
  std::unique_ptr<detail::BpeModel> model;
  detail::AddedVocabulary added;
  detail::SpecialTokenFrame frame;  // what add_special_tokens puts around the sequence
  std::unique_ptr<detail::Decoder> decoder;
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::string chat_template;
  int32_t vocab_size = 0;

  int32_t token_to_id(std::string_view token) const {
    if (const detail::AddedToken* added_token = added.by_content(token)) return added_token->id;
    return model->token_to_id(token);
  }
  std::optional<int32_t> id_of(const std::optional<std::string>& token) const {
    if (!token) return std::nullopt;
    const int32_t id = token_to_id(*token);
    return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
  }

  // Appends the ids of `text` (valid UTF-8) and, when `offsets` is given, their input byte ranges.
  void encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& ids,
              std::vector<std::pair<size_t, size_t>>* offsets) const;

  static std::unique_ptr<Impl> load(const std::string& dir);
};

}  // namespace trlhpc::tokenizer
