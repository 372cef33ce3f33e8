#include "tokenizer_decoder.hpp"

#include <nlohmann/json.hpp>

#include "byte_level.hpp"
#include "json_fields.hpp"
#include "trlhpc/core/error.hpp"
#include "utf8.hpp"

namespace trlhpc::tokenizer::detail {
namespace {

// ByteLevel: every token's characters back to bytes (a token with a character outside the
// alphabet is taken as its own UTF-8), all concatenated and read as UTF-8 with U+FFFD for errors.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes, token_bytes;
    for (const auto& token : tokens) bytes += byte_level_decode(token, token_bytes) ? token_bytes : token;
    tokens.assign(1, is_valid_utf8(bytes) ? bytes : repair_utf8(bytes));
  }
};

// Metaspace: the replacement becomes a space, except in the first token when a prefix was prepended.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends) : replacement_(std::move(replacement)), prepends_(prepends) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& token = tokens[i];
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepends_)) out += ' ';
          pos += replacement_.size();
        } else {
          out += token[pos++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepends_;
};

// Replace: literal `pattern` -> `content` in each token.
class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& token : tokens) {
      std::string out;
      size_t copied = 0;
      for (size_t at = token.find(pattern_); at != std::string::npos; at = token.find(pattern_, at + pattern_.size())) {
        out.append(token, copied, at - copied);
        out += content_;
        copied = at + pattern_.size();
      }
      out.append(token, copied, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
};

// ByteFallback: runs of "<0xXX>" tokens become the text of their bytes, or one U+FFFD per byte
// when those bytes are not valid UTF-8.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (auto& token : tokens) {
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && is_hex(token[3]) && is_hex(token[4])) {
        pending.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Strip: removes up to `start` leading and `stop` trailing copies of the character `content` per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (auto& token : tokens) {
      size_t begin = 0, end = token.size();
      for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0 && begin < end; ++i)
        begin += content_.size();
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i)
        end -= content_.size();
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t count_field(const nlohmann::json& spec, const char* key, const std::string& where) {
  const nlohmann::json& value = required_field(spec, key, where);
  TRLHPC_REQUIRE(value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0),
                 where + ": \"" + key + "\" must be a non-negative integer");
  return value.get<size_t>();
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = required_string(spec, "type", where + " decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Metaspace") {
    std::string replacement = optional_string(spec, "replacement").value_or("\xE2\x96\x81");
    const auto scheme = optional_string(spec, "prepend_scheme");
    const bool prepends = scheme ? *scheme != "never" : optional_bool(spec, "add_prefix_space", true);
    return std::make_unique<MetaspaceDecoder>(std::move(replacement), prepends);
  }
  if (type == "Replace") {
    const Pattern pattern = read_pattern(spec, where + " Replace decoder");
    TRLHPC_REQUIRE(!pattern.is_regex && !pattern.text.empty(),
                   where + ": Replace decoder needs a non-empty {\"String\": ...} pattern");
    return std::make_unique<ReplaceDecoder>(pattern.text, required_string(spec, "content", where + " Replace decoder"));
  }
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(required_string(spec, "content", where + " Strip decoder"),
                                          count_field(spec, "start", where + " Strip decoder"),
                                          count_field(spec, "stop", where + " Strip decoder"));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& step : required_array(spec, "decoders", where + " Sequence decoder")) {
      auto decoder = make_decoder(step, where);
      if (decoder) steps.push_back(std::move(decoder));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  throw_user_error(where + ": decoder type \"" + type + "\" is not supported (trlhpc supports ByteLevel, " +
                   "Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)");
}

std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens) {
  std::string out;
  if (decoder == nullptr) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode_chain(tokens);
  for (const auto& token : tokens) out += token;
  return out;
}

}  // namespace trlhpc::tokenizer::detail
