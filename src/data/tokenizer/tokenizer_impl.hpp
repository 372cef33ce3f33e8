#pragma once
// The parts of a loaded Tokenizer (private to src/data). tokenizer_loader.cpp fills it from the
// files of a tokenizer directory; tokenizer.cpp runs the encode/decode pipeline over it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer_added_tokens.hpp"
#include "tokenizer_bpe_model.hpp"
#include "tokenizer_decoder.hpp"
#include "tokenizer_normalizer.hpp"
#include "tokenizer_post_processor.hpp"
#include "tokenizer_pre_tokenizer.hpp"
#include "trlhpc/data/tokenizer.hpp"

namespace trlhpc::data {

class Tokenizer::Impl {
 public:
  std::string source;  // the directory, for messages
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  tok::AddedVocabulary added;
  tok::SpecialTokenFrame frame;  // what add_special_tokens puts around the sequence
  std::unique_ptr<tok::Decoder> decoder;
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::string chat_template;
  int32_t vocab_size = 0;

  int32_t token_to_id(std::string_view token) const {
    if (const tok::AddedToken* added_token = added.by_content(token)) return added_token->id;
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

}  // namespace trlhpc::data
