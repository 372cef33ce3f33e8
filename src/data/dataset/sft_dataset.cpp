#include "trlhpc/data/dataset/sft_dataset.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/dataset/reader.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace trlhpc::dataset {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tokens of `text` whose byte range overlaps a marked byte (transformers' char_to_token over each
// generation span marks exactly the tokens that cover span characters).
std::vector<uint8_t> token_mask_from_bytes(const tokenizer::TokenizedText& tokens, const std::vector<uint8_t>& byte_mask) {
  std::vector<uint8_t> mask(tokens.ids.size(), 0);
  for (size_t t = 0; t < tokens.ids.size(); ++t) {
    const auto [begin, end] = tokens.offsets[t];
    for (size_t b = begin; b < end && b < byte_mask.size(); ++b)
      if (byte_mask[b]) {
        mask[t] = 1;
        break;
      }
  }
  return mask;
}

}  // namespace

struct RowTokenizer::State {
  SftDataOptions options;
  DatasetFormSpec form;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool completion_only = false;
  std::optional<chat_template::ChatTemplate> chat;
  nlohmann::ordered_json special_context;
  std::string eos_token;

  std::vector<int32_t> encode(const std::string& text, bool special = true) const { return tokenizer->encode(text, special); }

  TokenizedExample prompt_completion(const std::string& prompt_text, const std::string& full_text,
                                     bool add_special) const {
    TokenizedExample ex;
    const size_t prompt_tokens = encode(prompt_text, add_special).size();
    ex.input_ids = encode(full_text, add_special);
    ex.loss_mask.assign(ex.input_ids.size(), 1);
    if (completion_only)
      for (size_t t = 0; t < std::min(prompt_tokens, ex.loss_mask.size()); ++t) ex.loss_mask[t] = 0;
    return ex;
  }
};

RowTokenizer::RowTokenizer(const SftDataOptions& options, const DatasetFormSpec& form, const tokenizer::Tokenizer* tokenizer)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = options;
  s.form = form;
  s.tokenizer = tokenizer;
  s.completion_only = resolve_completion_only_loss(options.completion_only_loss, form);
  if (form.form != DatasetForm::kPreTokenized && !tokenizer)
    throw UserError("dataset " + options.dataset_name + " holds " + dataset_form_name(form.form) +
                    " rows, which need a tokenizer: pass --tokenizer DIR or --model_name_or_path DIR");
  if (tokenizer) s.eos_token = tokenizer->eos_token().value_or("");
  if (form.conversational()) {
    s.chat = chat_template::ChatTemplate::parse(chat_template::load_chat_template(options.tokenizer_dir, options.chat_template_path));
    s.special_context = chat_template::load_special_tokens_context(options.tokenizer_dir);
  }
  if (options.assistant_only_loss && !form.conversational() && form.form != DatasetForm::kPreTokenized)
    throw UserError("--assistant_only_loss needs a conversational dataset (rows with \"messages\"), but " +
                    options.dataset_name + " holds " + dataset_form_name(form.form) + " rows");
}

RowTokenizer::~RowTokenizer() = default;

std::string RowTokenizer::rendered_text(const DatasetRow& row) const {
  const State& s = *state_;
  if (!s.form.conversational()) return "";
  const nlohmann::ordered_json& messages = row.value.at(s.form.messages_field);
  return s.chat->render(messages, false, s.special_context).text;
}

TokenizedExample RowTokenizer::tokenize(const DatasetRow& row) const {
  const State& s = *state_;
  const nlohmann::ordered_json& v = row.value;
  switch (s.form.form) {
    case DatasetForm::kPreTokenized: return pretokenized_example(s.form, row, s.completion_only);
    case DatasetForm::kLanguageModeling: {
      std::string text = v.at(s.form.text_field).get<std::string>();
      if (!s.eos_token.empty() && !ends_with(text, s.eos_token)) text += s.eos_token;
      TokenizedExample ex;
      ex.input_ids = s.encode(text);
      ex.loss_mask.assign(ex.input_ids.size(), 1);
      return ex;
    }
    case DatasetForm::kPromptCompletion: {
      const std::string prompt = v.at("prompt").get<std::string>();
      std::string completion = v.at("completion").get<std::string>();
      if (!s.eos_token.empty() && !ends_with(completion, s.eos_token)) completion += s.eos_token;
      return s.prompt_completion(prompt, prompt + completion, true);
    }
    case DatasetForm::kConversationalPromptCompletion: {
      const nlohmann::ordered_json& prompt = v.at("prompt");
      nlohmann::ordered_json full = prompt;
      for (const auto& m : v.at("completion")) full.push_back(m);
      const std::string prompt_text = s.chat->render(prompt, true, s.special_context).text;
      const std::string full_text = s.chat->render(full, false, s.special_context).text;
      return s.prompt_completion(prompt_text, full_text, false);
    }
    case DatasetForm::kConversational: {
      const nlohmann::ordered_json& messages = v.at(s.form.messages_field);
      TokenizedExample ex;
      if (s.options.assistant_only_loss) {
        const chat_template::AssistantCharMask marked = chat_template::assistant_char_mask(*s.chat, messages, s.special_context);
        const tokenizer::TokenizedText tokens = s.tokenizer->encode_with_offsets(marked.text, false);
        ex.input_ids = tokens.ids;
        ex.loss_mask = token_mask_from_bytes(tokens, marked.mask);
      } else {
        ex.input_ids = s.encode(s.chat->render(messages, false, s.special_context).text, false);
        ex.loss_mask.assign(ex.input_ids.size(), 1);
      }
      return ex;
    }
  }
  return {};
}

SftTokenizedExamples SftDataset::tokenize(const SftDataOptions& options, const tokenizer::Tokenizer* tokenizer) {
  SftTokenizedExamples out;
  DatasetReader reader(resolve_dataset_files(options.dataset_name, options.split),
                       DatasetReaderOptions{options.skip_bad_rows});
  std::unique_ptr<RowTokenizer> row_tokenizer;
  const int32_t max_length = static_cast<int32_t>(options.max_length);
  const batching::PackingStrategy strategy = batching::parse_packing_strategy(options.packing_strategy);
  const bool truncate = !(options.packing && strategy == batching::PackingStrategy::kWrapped);
  DatasetScan scan = scan_dataset(reader, options.text_field, [&](const DatasetRow& row, const DatasetFormSpec& form) {
    if (!row_tokenizer) row_tokenizer = std::make_unique<RowTokenizer>(options, form, tokenizer);
    TokenizedExample ex = row_tokenizer->tokenize(row);
    if (ex.input_ids.empty()) return;
    if (truncate && ex.length() > max_length) {
      batching::truncate_example(ex, max_length);
      ++out.stats.truncated;
    }
    out.examples.push_back(std::move(ex));
  });
  if (out.examples.empty())
    throw UserError("dataset " + options.dataset_name + " produced no non-empty example: check the rows and --dataset_text_field");
  SftDataStats& st = out.stats;
  st.form = dataset_form_name(scan.form.form);
  st.rows_read = scan.rows;
  st.rows_skipped = scan.skipped_malformed + scan.skipped_invalid;
  st.examples = static_cast<int64_t>(out.examples.size());
  for (const TokenizedExample& ex : out.examples) {
    st.tokens += ex.length();
    for (uint8_t m : ex.loss_mask) st.target_tokens += m;
  }
  return out;
}

SftDataset SftDataset::from_examples(const SftDataOptions& options, SftTokenizedExamples tokenized,
                                     const tokenizer::Tokenizer* tokenizer) {
  if (tokenized.examples.empty())
    throw UserError("dataset " + options.dataset_name + " produced no non-empty example: check the rows and --dataset_text_field");
  SftDataset ds;
  ds.examples_ = std::move(tokenized.examples);
  ds.stats_ = std::move(tokenized.stats);
  const int32_t max_length = static_cast<int32_t>(options.max_length);
  const batching::PackingStrategy strategy = batching::parse_packing_strategy(options.packing_strategy);
  const std::vector<int32_t> lengths = batching::example_lengths(ds.examples_);
  // TRL shuffles the examples (seeded) before packing when shuffle_dataset is on, so documents that
  // sit next to each other in the file do not always share a row.
  std::vector<int64_t> order;
  if (options.packing && options.shuffle) order = batching::epoch_permutation(static_cast<int64_t>(lengths.size()), options.seed, 0);
  ds.rows_ = options.packing ? batching::pack(strategy, lengths, batching::PackingOptions{max_length}, order) : batching::unpacked_rows(lengths, max_length);
  ds.collate_.padding_free = options.padding_free;
  ds.collate_.pad_to_multiple_of = static_cast<int32_t>(options.pad_to_multiple_of);
  ds.collate_.pad_token_id = tokenizer && tokenizer->pad_id() ? *tokenizer->pad_id() : 0;
  ds.stats_.packed_rows = ds.num_rows();
  return ds;
}

SftDataset SftDataset::build(const SftDataOptions& options, const tokenizer::Tokenizer* tokenizer) {
  return from_examples(options, tokenize(options, tokenizer), tokenizer);
}

Batch SftDataset::collate(std::span<const int64_t> row_indices) const { return batching::collate(examples_, rows_, row_indices, collate_); }

}  // namespace trlhpc::dataset
