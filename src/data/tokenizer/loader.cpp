// Tokenizer::Impl::load: a Hugging Face tokenizer directory -> the pipeline parts of tokenizer_impl.hpp.
#include <filesystem>
#include <unordered_set>

#include "json_fields.hpp"
#include "tokenizer_files.hpp"
#include "tokenizer_impl.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::tokenizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json& field_or_null(const json& object, const char* key) {
  static const json null_value;
  const auto it = object.find(key);
  return it == object.end() ? null_value : *it;
}

std::string model_type(const json& model) {
  if (const auto type = detail::optional_string(model, "type")) return *type;
  // Files from old versions of the library leave out the type; infer it as the library does.
  if (model.contains("merges")) return "BPE";
  if (model.contains("vocab") && model["vocab"].is_array()) return "Unigram";
  return "WordPiece";
}

// tokenizer.json: model, normalizer, pre_tokenizer, post_processor, decoder, added_tokens.
void load_tokenizer_json(Tokenizer::Impl& impl, const json& spec, const std::string& file,
                         std::vector<detail::AddedToken>& added_tokens) {
  const json& model = detail::required_field(spec, "model", file);
  const std::string type = model_type(model);
  TRLHPC_REQUIRE(type == "BPE", file + ": model type \"" + type + "\" is not supported; trlhpc encodes BPE " +
                                    "tokenizers only (byte-level like GPT-2/Qwen2/Llama-3, or SentencePiece-style " +
                                    "with byte fallback like Llama-2); use a tokenizer with a BPE model");
  const json& dropout = field_or_null(model, "dropout");
  TRLHPC_REQUIRE(dropout.is_null() || (dropout.is_number() && dropout.get<double>() == 0.0),
                 file + ": BPE dropout is not supported (it makes encoding random); set \"dropout\" to null");

  detail::BpeModelSpec bpe;
  bpe.vocab = detail::read_vocab(detail::required_field(model, "vocab", file + " model"), file + " model.vocab");
  if (model.contains("merges")) bpe.merges = detail::read_merges(model["merges"], file + " model.merges");
  bpe.unk_token = detail::optional_string(model, "unk_token");
  bpe.continuing_subword_prefix = detail::optional_string(model, "continuing_subword_prefix").value_or("");
  bpe.end_of_word_suffix = detail::optional_string(model, "end_of_word_suffix").value_or("");
  bpe.fuse_unk = detail::optional_bool(model, "fuse_unk", false);
  bpe.byte_fallback = detail::optional_bool(model, "byte_fallback", false);
  bpe.ignore_merges = detail::optional_bool(model, "ignore_merges", false);
  bpe.byte_level = detail::pre_tokenizer_is_byte_level(field_or_null(spec, "pre_tokenizer"), file);
  impl.model = std::make_unique<detail::BpeModel>(std::move(bpe), file);

  impl.normalizer = detail::make_normalizer(field_or_null(spec, "normalizer"), file);
  impl.pre_tokenizer = detail::make_pre_tokenizer(field_or_null(spec, "pre_tokenizer"), file);
  impl.decoder = detail::make_decoder(field_or_null(spec, "decoder"), file);
  impl.frame = detail::make_special_token_frame(field_or_null(spec, "post_processor"), file);
  const json& listed = field_or_null(spec, "added_tokens");
  if (!listed.is_null()) {
    TRLHPC_REQUIRE(listed.is_array(), file + ": \"added_tokens\" must be a list");
    for (const auto& entry : listed) added_tokens.push_back(detail::read_added_token(entry, -1, file + " added_tokens"));
  }
}

// vocab.json + merges.txt: the pipeline transformers builds for Qwen2Tokenizer / GPT2Tokenizer.
void load_vocab_merges(Tokenizer::Impl& impl, const fs::path& root, const json& config) {
  const std::string tokenizer_class = detail::optional_string(config, "tokenizer_class").value_or("GPT2Tokenizer");
  const bool qwen2 = tokenizer_class.rfind("Qwen2Tokenizer", 0) == 0;
  const bool add_prefix_space = detail::optional_bool(config, "add_prefix_space", false);
  const std::string vocab_file = (root / "vocab.json").string();

  detail::BpeModelSpec bpe;
  bpe.vocab = detail::read_vocab(detail::read_json_file(vocab_file), vocab_file);
  bpe.merges = detail::read_merges_txt(root / "merges.txt");
  bpe.byte_level = true;
  impl.model = std::make_unique<detail::BpeModel>(std::move(bpe), vocab_file + " / merges.txt");

  const std::string where = root.string() + " (" + tokenizer_class + " from vocab.json + merges.txt)";
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"use_regex", !qwen2}};
  if (qwen2) {
    impl.normalizer = detail::make_normalizer(json{{"type", "NFC"}}, where);
    const json split = {{"type", "Split"},
                        {"pattern", {{"Regex", detail::kQwen2SplitPattern}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
    impl.pre_tokenizer = detail::make_pre_tokenizer(json{{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}, where);
  } else {
    impl.pre_tokenizer = detail::make_pre_tokenizer(byte_level, where);
  }
  impl.decoder = detail::make_decoder(json{{"type", "ByteLevel"}}, where);
}

// Special tokens transformers' tokenizer classes assume when tokenizer_config.json does not name them.
void apply_class_defaults(Tokenizer::Impl& impl, const json& config, bool from_vocab_merges) {
  if (!from_vocab_merges) return;
  const std::string tokenizer_class = detail::optional_string(config, "tokenizer_class").value_or("GPT2Tokenizer");
  const bool qwen2 = tokenizer_class.rfind("Qwen2Tokenizer", 0) == 0;
  const std::string endoftext = "<|endoftext|>";
  if (!config.contains("unk_token")) impl.unk_token = endoftext;
  if (!config.contains("eos_token")) impl.eos_token = endoftext;
  if (!config.contains("bos_token") && !qwen2) impl.bos_token = endoftext;
  if (!config.contains("pad_token") && qwen2) impl.pad_token = endoftext;
}

std::string read_chat_template(const fs::path& root, const json& config, const std::string& config_file) {
  if (fs::exists(root / "chat_template.jinja")) return detail::read_text_file(root / "chat_template.jinja");
  const json& value = field_or_null(config, "chat_template");
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    for (const auto& entry : value)
      if (detail::optional_string(entry, "name") == "default") return detail::required_string(entry, "template", config_file);
    if (!value.empty()) return detail::required_string(value[0], "template", config_file);
  }
  return "";
}

// The model and pipeline from tokenizer.json when there is one, else from vocab.json + merges.txt.
// Returns whether it was the latter, which changes the special-token defaults and the post-processor.
bool load_model_files(Tokenizer::Impl& impl, const fs::path& root, const std::string& dir, const json& config,
                      std::vector<detail::AddedToken>& added_tokens) {
  const bool from_vocab_merges = !fs::exists(root / "tokenizer.json");
  if (!from_vocab_merges) {
    const fs::path file = root / "tokenizer.json";
    load_tokenizer_json(impl, detail::read_json_file(file), file.string(), added_tokens);
  } else {
    TRLHPC_REQUIRE(fs::exists(root / "vocab.json") && fs::exists(root / "merges.txt"),
                   dir + ": no tokenizer.json, and no vocab.json + merges.txt; this is not a Hugging Face " +
                       "BPE tokenizer directory");
    load_vocab_merges(impl, root, config);
  }
  return from_vocab_merges;
}

// tokenizer_config.json: added_tokens_decoder entries the tokenizer does not have yet.
void add_config_added_tokens(const json& config, const std::string& config_file,
                             std::vector<detail::AddedToken>& added_tokens) {
  std::unordered_set<int32_t> known_ids;
  for (const auto& token : added_tokens) known_ids.insert(token.id);
  const json& decoder_entries = field_or_null(config, "added_tokens_decoder");
  if (!decoder_entries.is_object()) return;
  for (const auto& [key, entry] : decoder_entries.items()) {
    int32_t id = -1;
    try {
      id = detail::checked_token_id(nlohmann::json(std::stoll(key)), config_file + ": added_tokens_decoder key");
    } catch (const std::logic_error&) {  // std::stoll: not a number, or out of range
      throw_user_error(config_file + ": added_tokens_decoder key \"" + key + "\" is not a token id");
    }
    if (known_ids.insert(id).second)
      added_tokens.push_back(detail::read_added_token(entry, id, config_file + " added_tokens_decoder"));
  }
}

// bos/eos/pad/unk as tokenizer_config.json names them, then the tokenizer class's defaults for the rest.
void read_special_tokens(Tokenizer::Impl& impl, const json& config, bool from_vocab_merges) {
  impl.bos_token = detail::read_special_token(config, "bos_token");
  impl.eos_token = detail::read_special_token(config, "eos_token");
  impl.pad_token = detail::read_special_token(config, "pad_token");
  impl.unk_token = detail::read_special_token(config, "unk_token");
  apply_class_defaults(impl, config, from_vocab_merges);
}

// As transformers does, named special tokens that are not added tokens yet become special added
// tokens (their vocabulary id, or a new id after the largest one).
void add_named_special_tokens(const Tokenizer::Impl& impl, const json& config,
                              std::vector<detail::AddedToken>& added_tokens) {
  std::vector<std::string> named;
  for (const auto* token : {&impl.bos_token, &impl.eos_token, &impl.unk_token, &impl.pad_token})
    if (*token) named.push_back(**token);
  const json& additional = field_or_null(config, "additional_special_tokens");
  if (additional.is_array())
    for (const auto& token : additional)
      if (const auto content = token.is_string() ? token.get<std::string>() : detail::optional_string(token, "content"))
        named.push_back(*content);
  int32_t next_id = static_cast<int32_t>(impl.model->tokens_by_id().size());
  for (const auto& token : added_tokens) next_id = std::max(next_id, token.id + 1);
  for (const std::string& content : named) {
    bool present = false;
    for (const auto& token : added_tokens) present |= token.content == content;
    if (present) continue;
    detail::AddedToken token;
    token.content = content;
    token.id = impl.model->token_to_id(content);
    if (token.id < 0) token.id = next_id++;
    token.special = true;
    token.normalized = false;
    added_tokens.push_back(token);
  }
}

// transformers' update_post_processor: a tokenizer built from vocab.json + merges.txt has no
// post-processor, so it gets "[bos] $A [eos]" by add_bos_token/add_eos_token (default false). With
// a tokenizer.json, transformers ignores those flags and keeps the file's post-processor.
void apply_bos_eos_flags(Tokenizer::Impl& impl, const json& config, bool from_vocab_merges) {
  if (!from_vocab_merges) return;
  const auto bos = impl.id_of(impl.bos_token), eos = impl.id_of(impl.eos_token);
  impl.frame = detail::bos_eos_frame(bos.value_or(-1), detail::optional_bool(config, "add_bos_token", false),
                                     eos.value_or(-1), detail::optional_bool(config, "add_eos_token", false));
}

// The model's vocabulary plus the distinct added tokens it does not already hold.
int32_t count_vocab_size(const Tokenizer::Impl& impl) {
  std::unordered_set<std::string> distinct;
  size_t extra = 0;
  for (const auto& token : impl.added.tokens())
    if (impl.model->token_to_id(token.content) < 0 && distinct.insert(token.content).second) ++extra;
  return static_cast<int32_t>(impl.model->size() + extra);
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> Tokenizer::Impl::load(const std::string& dir) {
  const fs::path root(dir);
  TRLHPC_REQUIRE(fs::is_directory(root), dir + ": not a directory; pass a Hugging Face tokenizer directory " +
                                             "(tokenizer.json, or vocab.json + merges.txt, with tokenizer_config.json)");
  const fs::path config_path = root / "tokenizer_config.json";
  const std::string config_file = config_path.string();
  auto impl = std::make_unique<Impl>();
  impl->source = dir;
  try {
    const json config = fs::exists(config_path) ? detail::read_json_file(config_path) : json::object();
    TRLHPC_REQUIRE(config.is_object(), config_file + ": must be a JSON object");

    std::vector<detail::AddedToken> added_tokens;
    const bool from_vocab_merges = load_model_files(*impl, root, dir, config, added_tokens);
    add_config_added_tokens(config, config_file, added_tokens);
    read_special_tokens(*impl, config, from_vocab_merges);
    add_named_special_tokens(*impl, config, added_tokens);
    impl->added = detail::AddedVocabulary(std::move(added_tokens), impl->normalizer.get());
    apply_bos_eos_flags(*impl, config, from_vocab_merges);
    impl->chat_template = read_chat_template(root, config, config_file);
    impl->vocab_size = count_vocab_size(*impl);
  } catch (const nlohmann::json::exception& e) {
    // Type and range errors from malformed files surface here rather than as crashes.
    throw_user_error(dir + ": unexpected content in the tokenizer files (" + std::string(e.what()) +
                     "); re-download or fix them");
  }
  return impl;
}

}  // namespace trlhpc::tokenizer
