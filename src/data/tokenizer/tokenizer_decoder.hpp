#pragma once
// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip
// and Sequence, each a step of the library's decode_chain over the list of token strings; the
// final strings are concatenated. Without a decoder the tokens are joined with spaces.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace trlhpc::tokenizer::detail {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place (the library's decode_chain).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// The decoder described by `spec`, or nullptr for null. `where` names the file for error messages.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec, const std::string& where);

// Text of `tokens` through `decoder` (may be null).
std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace trlhpc::tokenizer::detail
