#include "pre_tokenizer.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "json_fields.hpp"
#include "trlhpc/core/error.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// What happens to the matched delimiters (the library's SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw_user_error(where + ": Split behavior \"" + name + "\" is not one of Removed, Isolated, " +
                   "MergedWithPrevious, MergedWithNext, Contiguous");
}

// Finds delimiters in a piece: a regex or a literal string.
class Delimiter {
 public:
  Delimiter(std::optional<Regex> regex, std::string literal) : regex_(std::move(regex)), literal_(std::move(literal)) {}
  void find(std::string_view piece, PreTokenizeScratch& scratch) const {
    scratch.matches.clear();
    if (regex_) {
      regex_->find_all(piece, scratch.regex, scratch.matches);
      return;
    }
    if (literal_.empty()) return;
    for (size_t at = piece.find(literal_); at != std::string_view::npos; at = piece.find(literal_, at + literal_.size()))
      scratch.matches.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(at + literal_.size())});
  }

 private:
  std::optional<Regex> regex_;
  std::string literal_;
};

// Splits every piece of `segment` at the delimiter's matches (the library's NormalizedString::split).
void split_pieces(Segment& segment, const Delimiter& delimiter, SplitBehavior behavior, bool invert,
                  PreTokenizeScratch& scratch) {
  struct Part {
    uint32_t begin, end;
    bool is_match;
  };
  std::vector<Part> parts;
  scratch.pieces.clear();
  const std::string_view text = segment.normalized.text;
  for (const ByteSpan piece : segment.pieces) {
    delimiter.find(text.substr(piece.begin, piece.end - piece.begin), scratch);
    parts.clear();
    uint32_t previous_end = piece.begin;
    for (const ByteSpan m : scratch.matches) {
      const uint32_t begin = piece.begin + m.begin, end = piece.begin + m.end;
      if (begin > previous_end) parts.push_back({previous_end, begin, invert});
      parts.push_back({begin, end, !invert});
      previous_end = end;
    }
    if (previous_end < piece.end) parts.push_back({previous_end, piece.end, invert});

    const size_t first_new = scratch.pieces.size();
    auto push = [&](uint32_t begin, uint32_t end) { scratch.pieces.push_back({begin, end}); };
    bool previous_match = false;
    switch (behavior) {
      case SplitBehavior::Isolated:
        for (const Part& p : parts) push(p.begin, p.end);
        break;
      case SplitBehavior::Removed:
        for (const Part& p : parts)
          if (!p.is_match) push(p.begin, p.end);
        break;
      case SplitBehavior::Contiguous:
        for (const Part& p : parts) {
          if (p.is_match == previous_match && scratch.pieces.size() > first_new) scratch.pieces.back().end = p.end;
          else push(p.begin, p.end);
          previous_match = p.is_match;
        }
        break;
      case SplitBehavior::MergedWithPrevious:
        for (const Part& p : parts) {
          if (p.is_match && !previous_match && scratch.pieces.size() > first_new) scratch.pieces.back().end = p.end;
          else push(p.begin, p.end);
          previous_match = p.is_match;
        }
        break;
      case SplitBehavior::MergedWithNext:
        for (size_t i = parts.size(); i-- > 0;) {
          const Part& p = parts[i];
          if (p.is_match && !previous_match && scratch.pieces.size() > first_new) scratch.pieces.back().begin = p.begin;
          else push(p.begin, p.end);
          previous_match = p.is_match;
        }
        std::reverse(scratch.pieces.begin() + static_cast<long>(first_new), scratch.pieces.end());
        break;
    }
  }
  segment.pieces.clear();
  for (const ByteSpan p : scratch.pieces)
    if (p.end > p.begin) segment.pieces.push_back(p);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Delimiter delimiter, SplitBehavior behavior, bool invert)
      : delimiter_(std::move(delimiter)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Segment& segment, PreTokenizeScratch& scratch) const override {
    split_pieces(segment, delimiter_, behavior_, invert_, scratch);
  }

 private:
  Delimiter delimiter_;
  SplitBehavior behavior_;
  bool invert_;
};

// ByteLevel: optional prefix space per piece, optional GPT-2 regex split. The byte mapping itself
// happens in the model (see the header).
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space),
        split_(use_regex ? std::optional<Delimiter>(Delimiter(Regex(kGpt2SplitPattern, where), "")) : std::nullopt) {}
  void pre_tokenize(Segment& segment, PreTokenizeScratch& scratch) const override {
    if (add_prefix_space_) {
      AlignedTextBuilder out(segment.normalized);
      std::vector<ByteSpan> pieces;
      for (const ByteSpan piece : segment.pieces) {
        const uint32_t begin = static_cast<uint32_t>(out.size());
        if (segment.normalized.text[piece.begin] != ' ') out.insert(" ", out.span_before(piece.begin));
        out.copy(piece.begin, piece.end);
        pieces.push_back({begin, static_cast<uint32_t>(out.size())});
      }
      segment.normalized = out.finish();
      segment.pieces = std::move(pieces);
    }
    if (split_) split_pieces(segment, *split_, SplitBehavior::Isolated, false, scratch);
  }

 private:
  bool add_prefix_space_;
  std::optional<Delimiter> split_;
};

// Metaspace: spaces become the replacement ("▁"), a replacement is prepended per prepend_scheme,
// and with split=true each piece is cut before every replacement.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(replacement), prepend_(prepend), split_(split), delimiter_(std::nullopt, std::move(replacement)) {}

  void pre_tokenize(Segment& segment, PreTokenizeScratch& scratch) const override {
    const std::string& text = segment.normalized.text;
    AlignedTextBuilder out(segment.normalized);
    std::vector<ByteSpan> pieces;
    for (const ByteSpan piece : segment.pieces) {
      const uint32_t begin = static_cast<uint32_t>(out.size());
      const bool starts_with_replacement =
          text.compare(piece.begin, replacement_.size(), replacement_) == 0 || text[piece.begin] == ' ';
      const bool at_input_start = segment.starts_input && piece.begin == 0;
      if (!starts_with_replacement &&
          (prepend_ == Prepend::Always || (prepend_ == Prepend::First && at_input_start)))
        out.insert(replacement_, out.span_before(piece.begin));
      size_t copied = piece.begin;
      for (size_t i = piece.begin; i < piece.end; ++i) {
        if (text[i] != ' ') continue;
        out.copy(copied, i);
        out.replace(i, i + 1, replacement_);
        copied = i + 1;
      }
      out.copy(copied, piece.end);
      pieces.push_back({begin, static_cast<uint32_t>(out.size())});
    }
    segment.normalized = out.finish();
    segment.pieces = std::move(pieces);
    if (split_) split_pieces(segment, delimiter_, SplitBehavior::MergedWithNext, false, scratch);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  Delimiter delimiter_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(Segment& segment, PreTokenizeScratch& scratch) const override {
    for (const auto& step : steps_) step->pre_tokenize(segment, scratch);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

MetaspacePreTokenizer::Prepend metaspace_prepend(const nlohmann::json& spec, const std::string& where) {
  if (const auto scheme = optional_string(spec, "prepend_scheme")) {
    if (*scheme == "always") return MetaspacePreTokenizer::Prepend::Always;
    if (*scheme == "first") return MetaspacePreTokenizer::Prepend::First;
    if (*scheme == "never") return MetaspacePreTokenizer::Prepend::Never;
    throw_user_error(where + ": Metaspace prepend_scheme \"" + *scheme + "\" is not always, first or never");
  }
  // Files written before prepend_scheme existed carry add_prefix_space.
  return optional_bool(spec, "add_prefix_space", true) ? MetaspacePreTokenizer::Prepend::Always
                                                        : MetaspacePreTokenizer::Prepend::Never;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = required_string(spec, "type", where + " pre_tokenizer");
  if (type == "Split") {
    const Pattern pattern = read_pattern(spec, where + " Split pre-tokenizer");
    Delimiter delimiter = pattern.is_regex ? Delimiter(Regex(pattern.text, where + " Split pre-tokenizer"), "")
                                           : Delimiter(std::nullopt, pattern.text);
    return std::make_unique<SplitPreTokenizer>(
        std::move(delimiter), parse_behavior(required_string(spec, "behavior", where + " Split"), where),
        optional_bool(spec, "invert", false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(optional_bool(spec, "add_prefix_space", true),
                                                   optional_bool(spec, "use_regex", true), where + " ByteLevel");
  }
  if (type == "Metaspace") {
    std::string replacement = optional_string(spec, "replacement").value_or("\xE2\x96\x81");
    TRLHPC_REQUIRE(!replacement.empty() && replacement.find(' ') == std::string::npos,
                   where + ": Metaspace replacement must be one non-space character");
    return std::make_unique<MetaspacePreTokenizer>(std::move(replacement), metaspace_prepend(spec, where),
                                                   optional_bool(spec, "split", true));
  }
  if (type == "Digits") {
    const bool individual = optional_bool(spec, "individual_digits", false);
    return std::make_unique<SplitPreTokenizer>(Delimiter(Regex(R"(\p{N})", where + " Digits"), ""),
                                               individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(Delimiter(Regex(R"(\s)", where + " WhitespaceSplit"), ""),
                                               SplitBehavior::Removed, false);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& step : required_array(spec, "pretokenizers", where + " Sequence pre-tokenizer")) {
      auto pre_tokenizer = make_pre_tokenizer(step, where);
      if (pre_tokenizer) steps.push_back(std::move(pre_tokenizer));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  throw_user_error(where + ": pre_tokenizer type \"" + type + "\" is not supported (trlhpc supports Split, " +
                   "ByteLevel, Metaspace, Digits, WhitespaceSplit and Sequence)");
}

bool pre_tokenizer_is_byte_level(const nlohmann::json& spec, const std::string& where) {
  if (!spec.is_object()) return false;
  const auto type = optional_string(spec, "type");
  if (type == "ByteLevel") return true;
  if (type != "Sequence" || !spec.contains("pretokenizers") || !spec["pretokenizers"].is_array()) return false;
  const auto& steps = spec["pretokenizers"];
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!pre_tokenizer_is_byte_level(steps[i], where)) continue;
    TRLHPC_REQUIRE(i + 1 == steps.size(), where + ": a ByteLevel pre-tokenizer followed by other steps in a " +
                                              "Sequence is not supported; ByteLevel must be the last step");
    return true;
  }
  return false;
}

}  // namespace trlhpc::tokenizer::detail
