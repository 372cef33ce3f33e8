#pragma once
// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, Prepend, Replace, Strip, Sequence.
// Each rewrites the text of one stretch between added tokens, keeping its alignment to the input.
// Other types (NFKC, NFKD, Lowercase, BertNormalizer, Precompiled, ...) are rejected at load time.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "aligned_text.hpp"

namespace trlhpc::tokenizer::detail {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(AlignedText& text) const = 0;
};

// The normalizer described by `spec` (a tokenizer.json "normalizer" object), or nullptr for null.
// `where` names the file for error messages.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec, const std::string& where);

// Convenience: `text` normalized without alignment.
std::string normalize_string(const Normalizer& normalizer, const std::string& text);

}  // namespace trlhpc::tokenizer::detail
