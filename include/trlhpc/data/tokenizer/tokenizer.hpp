#pragma once
// Tokenizer: Hugging Face BPE tokenizers, encoding exactly as the Python `tokenizers` library does.
//
// Loads a Hugging Face tokenizer directory:
//   - tokenizer.json (+ tokenizer_config.json): model type BPE, either byte-level (GPT-2, Qwen2,
//     Llama-3: Split regex + ByteLevel pre-tokenizers) or SentencePiece-style with byte fallback
//     (Llama-2: Prepend/Replace normalizers or a Metaspace pre-tokenizer);
//   - or vocab.json + merges.txt + tokenizer_config.json (GPT-2 / Qwen2 layout without tokenizer.json):
//     built the way transformers builds Qwen2Tokenizer (NFC, Qwen2 split regex, ByteLevel) when
//     tokenizer_class says Qwen2Tokenizer, and GPT2Tokenizer (ByteLevel with the GPT-2 regex) otherwise.
//
// The pipeline is the library's: added/special tokens are cut out of the text first (lstrip, rstrip,
// single_word and normalized flags honoured), each remaining stretch is normalized, pre-tokenized
// into pieces and each piece is BPE-encoded; the post-processor then adds BOS/EOS when
// add_special_tokens is true. As in transformers 5: with a tokenizer.json its post-processor decides
// (tokenizer_config.json's add_bos_token/add_eos_token are ignored); a vocab.json + merges.txt
// tokenizer adds "[bos] $A [eos]" following those flags (default: nothing). Special tokens that
// tokenizer_config.json names (bos/eos/unk/pad, additional_special_tokens) are added tokens.
//
// Not reproduced: transformers 5 rebuilds some classes' pipelines instead of reading tokenizer.json
// (LlamaTokenizer gets Metaspace(prepend_scheme="always", split=false) and no normalizer, which
// differs from a Llama-2 tokenizer.json on leading/double spaces and on text after special tokens);
// trlhpc, like the `tokenizers` library, follows tokenizer.json.
//
// Errors (missing or malformed files, WordPiece/Unigram models, unsupported normalizers or
// pre-tokenizers) are UserError naming the file and the unsupported thing.
//
// Thread safety: a loaded Tokenizer is immutable apart from an internal, locked word cache, so
// encode/decode may be called from many threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trlhpc::tokenizer {

// Largest token id a tokenizer directory may use (vocabulary, added tokens, added_tokens_decoder).
// tokenizer.json comes from an untrusted model directory and the id table is sized by the largest id,
// so one stray id must not ask for gigabytes. Real vocabularies stay under 300,000 ids.
inline constexpr int32_t kMaxTokenId = (1 << 22) - 1;  // 4,194,303

// Ids with, for each id, the bytes [begin, end) of the input text it came from. Special tokens the
// post-processor added have an empty range {0, 0}; tokens of an added-token match cover the match.
// Invalid UTF-8 is encoded as if each maximal ill-formed subsequence were U+FFFD (as the library
// does); the offsets are still byte offsets into the input as given: a token that comes from such a
// U+FFFD (or from part of its three bytes) covers the whole ill-formed subsequence.
struct TokenizedText {
  std::vector<int32_t> ids;                        // (T)
  std::vector<std::pair<size_t, size_t>> offsets;  // (T) byte offsets into the input
};

class Tokenizer {
 public:
  // Loads `dir` as described above. Throws UserError when the files are missing, malformed or use
  // features this implementation does not have.
  static Tokenizer from_directory(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (UTF-8; invalid bytes are read as U+FFFD). With add_special_tokens the
  // post-processor's BOS/EOS are added; special-token strings inside the text are matched either way.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  TokenizedText encode_with_offsets(std::string_view text, bool add_special_tokens = true) const;
  // encode() of every text, in parallel with OpenMP.
  std::vector<std::vector<int32_t>> encode_batch(std::span<const std::string> texts,
                                                 bool add_special_tokens = true) const;

  // Text of `ids` through the tokenizer's decoder. Unknown ids are skipped, as the library does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The token string as stored in the vocabulary (byte-level tokens in the GPT-2 alphabet, "Ġhello").
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Number of distinct tokens, model vocabulary and added tokens together (len(tokenizer) in transformers).
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;  // an added token marked special (skipped by decode(ids, true))

  // From tokenizer_config.json (bos_token/eos_token/pad_token/unk_token: a string or an AddedToken dict).
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::optional<int32_t> unk_id() const;
  std::optional<std::string> eos_token() const;
  std::optional<std::string> pad_token() const;
  // Replace the eos / pad token (TRL's SFTConfig eos_token / pad_token, which set tokenizer.eos_token /
  // pad_token): only the role moves; as transformers' setters, nothing is added to the vocabulary, so a
  // text holding the token's string is tokenized as before. The caller checks that the token is in it
  // (data/dataset/special_tokens.hpp).
  void set_eos_token(std::string token);
  void set_pad_token(std::string token);
  // Jinja chat template: chat_template.jinja, else tokenizer_config.json "chat_template" (a string, or
  // the "default" entry of a list of {name, template}); empty when there is none.
  const std::string& chat_template() const;

  class Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trlhpc::tokenizer
