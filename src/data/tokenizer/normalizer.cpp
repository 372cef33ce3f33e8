#include "normalizer.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "json_fields.hpp"
#include "regex.hpp"
#include "trlhpc/core/error.hpp"
#include "unicode_normalization.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

class CanonicalNormalizer final : public Normalizer {
 public:
  explicit CanonicalNormalizer(NormalizationForm form) : form_(form) {}
  void normalize(AlignedText& text) const override { normalize_canonical(form_, text); }

 private:
  NormalizationForm form_;
};

// Prepend: adds `prefix` in front of non-empty text.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(AlignedText& text) const override {
    if (text.text.empty()) return;
    AlignedTextBuilder out(text);
    out.insert(prefix_, out.span_before(0));
    out.copy(0, text.text.size());
    text = out.finish();
  }

 private:
  std::string prefix_;
};

// Replace: every match of a literal string or a regex becomes `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::optional<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}

  void normalize(AlignedText& text) const override {
    std::vector<ByteSpan> matches;
    if (regex_) {
      RegexScratch scratch;
      regex_->find_all(text.text, scratch, matches);
    } else {
      for (size_t at = text.text.find(literal_); at != std::string::npos; at = text.text.find(literal_, at + literal_.size()))
        matches.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(at + literal_.size())});
    }
    if (matches.empty()) return;
    AlignedTextBuilder out(text);
    size_t copied = 0;
    for (const ByteSpan& m : matches) {
      out.copy(copied, m.begin);
      out.replace(m.begin, m.end, content_);
      copied = m.end;
    }
    out.copy(copied, text.text.size());
    text = out.finish();
  }

 private:
  std::string literal_;
  std::optional<Regex> regex_;
  std::string content_;
};

// Strip: removes leading and/or trailing Unicode whitespace.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(AlignedText& text) const override {
    const std::string& s = text.text;
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t length;
        if (!is_unicode_whitespace(decode_utf8(s, begin, length))) break;
        begin += length;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t length;
        if (!is_unicode_whitespace(decode_utf8(s, start, length))) break;
        end = start;
      }
    }
    if (begin == 0 && end == s.size()) return;
    AlignedTextBuilder out(text);
    out.copy(begin, end);
    text = out.finish();
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(AlignedText& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = required_string(spec, "type", where + " normalizer");
  if (type == "NFC") return std::make_unique<CanonicalNormalizer>(NormalizationForm::NFC);
  if (type == "NFD") return std::make_unique<CanonicalNormalizer>(NormalizationForm::NFD);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(required_string(spec, "prepend", where + " Prepend"));
  if (type == "Replace") {
    const Pattern pattern = read_pattern(spec, where + " Replace normalizer");
    std::string content = required_string(spec, "content", where + " Replace normalizer");
    if (pattern.is_regex)
      return std::make_unique<ReplaceNormalizer>("", Regex(pattern.text, where + " Replace normalizer"), std::move(content));
    TRLHPC_REQUIRE(!pattern.text.empty(), where + ": Replace normalizer with an empty pattern");
    return std::make_unique<ReplaceNormalizer>(pattern.text, std::nullopt, std::move(content));
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(optional_bool(spec, "strip_left", true),
                                             optional_bool(spec, "strip_right", true));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : required_array(spec, "normalizers", where + " Sequence normalizer")) {
      auto normalizer = make_normalizer(step, where);
      if (normalizer) steps.push_back(std::move(normalizer));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  throw_user_error(where + ": normalizer type \"" + type + "\" is not supported (trlhpc supports NFC, NFD, " +
                   "Prepend, Replace, Strip and Sequence); use a tokenizer without it or convert the tokenizer");
}

std::string normalize_string(const Normalizer& normalizer, const std::string& text) {
  AlignedText aligned = AlignedText::verbatim(text, 0, false);
  normalizer.normalize(aligned);
  return aligned.text;
}

}  // namespace trlhpc::tokenizer::detail
