#include "trlhpc/data/dataset/sft_dataset.hpp"

#include <algorithm>
#include <mutex>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/data/dataset/parallel_tokenize.hpp"
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

// True when some token past the first is a target (the first token of a document has nothing before
// it inside the document, so it is never predicted whatever its mask says).
bool trains_a_token(const TokenizedExample& ex) {
  for (size_t t = 1; t < ex.loss_mask.size(); ++t)
    if (ex.loss_mask[t]) return true;
  return false;
}

// The error for a dataset in which no example trains a token (training it would divide a zero loss by
// zero targets at every step): what removed the targets, truncation first, then the masks in use.
UserError untrainable_dataset(const SftDataOptions& o, int64_t examples, int64_t truncated_away, const std::string& mask_cause) {
  std::string cause;
  if (truncated_away > 0)
    cause = std::to_string(truncated_away) + " of them lost every trained token to truncation at --max_length " +
            std::to_string(o.max_length) + " (it keeps the " +
            (o.truncation_mode == batching::TruncationMode::kKeepEnd && !o.packing ? "end" : "start") +
            " of each example; raise it)";
  if (truncated_away < examples) cause += (cause.empty() ? "" : "; the others: ") + mask_cause;
  return UserError("dataset " + o.dataset_name + ": no token is trained: all " + std::to_string(examples) +
                   " examples have every target masked; " + cause);
}

}  // namespace

struct RowTokenizer::State {
  SftDataOptions options;
  DatasetFormSpec form;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool completion_only = false;
  std::optional<chat_template::ChatTemplate> chat;
  std::string template_origin;  // the file the chat template came from, for error messages
  nlohmann::ordered_json special_context;  // special tokens, then --chat_template_kwargs over them
  std::string eos_token;
  mutable std::mutex end_of_turn_mutex;  // rows are tokenized on --dataset_num_proc threads
  mutable EndOfTurnCount end_of_turn;    // counted while tokenizing

  std::vector<int32_t> encode(const std::string& text, bool special = true) const { return tokenizer->encode(text, special); }

  // What the template sees besides messages for this row, as TRL's tokenize_fn passes it:
  // {**special_context, "tools": the row's tools (a list, or its JSON text parsed), **row's chat_template_kwargs}.
  nlohmann::ordered_json context(const DatasetRow& row) const {
    const nlohmann::ordered_json& v = row.value;
    const auto tools = v.find("tools"), kwargs = v.find("chat_template_kwargs");
    const bool has_tools = tools != v.end() && !tools->is_null();
    if (!has_tools && (kwargs == v.end() || kwargs->is_null())) return special_context;
    nlohmann::ordered_json c = special_context;
    if (has_tools) c["tools"] = tools->is_string() ? nlohmann::ordered_json::parse(tools->get<std::string>()) : *tools;
    if (kwargs != v.end()) chat_template::add_chat_template_kwargs(c, *kwargs, row.where());
    return c;
  }

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
    s.template_origin = chat_template::chat_template_origin(options.tokenizer_dir, options.chat_template_path);
    const std::string source = chat_template::load_chat_template(options.tokenizer_dir, options.chat_template_path);
    try {
      s.chat = chat_template::ChatTemplate::parse(source);
    } catch (const UserError& e) {
      throw UserError(s.template_origin + ": " + e.what());
    }
    s.special_context = chat_template::load_special_tokens_context(options.tokenizer_dir);
    // The template renders the tokenizer's special tokens as TRL set them (special_tokens.hpp): a replaced
    // eos_token / pad_token, and the pad token TRL falls back to when the tokenizer has none.
    if (tokenizer && tokenizer->eos_token() && !options.eos_token.empty()) s.special_context["eos_token"] = *tokenizer->eos_token();
    if (tokenizer && tokenizer->pad_token() && (!options.pad_token.empty() || !s.special_context.contains("pad_token")))
      s.special_context["pad_token"] = *tokenizer->pad_token();
    chat_template::add_chat_template_kwargs(s.special_context, options.chat_template_kwargs, "--chat_template_kwargs");
  }
  if (options.assistant_only_loss && !form.conversational() && form.form != DatasetForm::kPreTokenized)
    throw UserError("--assistant_only_loss needs a conversational dataset (rows with \"messages\"), but " +
                    options.dataset_name + " holds " + dataset_form_name(form.form) + " rows");
}

RowTokenizer::~RowTokenizer() = default;

std::string RowTokenizer::rendered_text(const DatasetRow& row) const {
  const State& s = *state_;
  if (!s.form.conversational()) return "";
  if (s.form.form == DatasetForm::kConversationalPromptCompletion) {  // the prompt + completion conversation
    nlohmann::ordered_json full = row.value.at("prompt");
    for (const auto& m : row.value.at("completion")) full.push_back(m);
    return s.chat->render(full, false, s.context(row)).text;
  }
  const nlohmann::ordered_json& messages = row.value.at(s.form.messages_field);
  return s.chat->render(messages, false, s.context(row)).text;
}

EndOfTurnCount RowTokenizer::end_of_turn() const {
  const std::lock_guard<std::mutex> lock(state_->end_of_turn_mutex);
  return state_->end_of_turn;
}

std::string RowTokenizer::untrained_cause() const {
  const State& s = *state_;
  const std::string single_token = "every example is a single token (the first token of a document is never a target)";
  switch (s.form.form) {
    case DatasetForm::kPreTokenized: {
      const bool completion = s.completion_only && s.form.has_completion_mask, assistant = s.form.has_assistant_masks;
      if (!completion && !assistant) return single_token;
      const std::string masks = completion && assistant ? "completion_mask and assistant_masks"
                                : completion              ? "completion_mask"
                                                          : "assistant_masks";
      return "the rows' " + masks + " mark no token past the first of any row" +
             (completion ? " (--completion_only_loss false ignores completion_mask)" : "");
    }
    case DatasetForm::kLanguageModeling: return single_token;
    case DatasetForm::kPromptCompletion:
    case DatasetForm::kConversationalPromptCompletion:
      if (!s.completion_only) return single_token;
      return "--completion_only_loss: no example has a completion token (are the completions empty?); "
             "--completion_only_loss false trains on the prompts too";
    case DatasetForm::kConversational:
      if (!s.options.assistant_only_loss) return single_token;
      if (s.chat->has_generation_blocks())
        return "--assistant_only_loss: the chat template marks no assistant token (its {% generation %} blocks render "
               "nothing: do they enclose the assistant messages' content?)";
      return "--assistant_only_loss: no row has assistant content to train on (the chat template has no "
             "{% generation %} markers, so the content of assistant messages is trained, and no row has a non-empty "
             "assistant message)";
  }
  return single_token;
}

TokenizedExample RowTokenizer::tokenize(const DatasetRow& row) const {
  if (!state_->form.conversational()) return tokenize_row(row);
  try {
    return tokenize_row(row);
  } catch (const UserError& e) {  // a template error: name the row and the template's file too
    throw UserError(row.where() + ": rendering the chat template of " + state_->template_origin + ": " + e.what());
  }
}

TokenizedExample RowTokenizer::tokenize_row(const DatasetRow& row) const {
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
      const nlohmann::ordered_json context = s.context(row);
      const std::string prompt_text = s.chat->render(prompt, true, context).text;
      const std::string full_text = s.chat->render(full, false, context).text;
      return s.prompt_completion(prompt_text, full_text, false);
    }
    case DatasetForm::kConversational: {
      const nlohmann::ordered_json& messages = v.at(s.form.messages_field);
      TokenizedExample ex;
      if (s.options.assistant_only_loss) {
        const chat_template::AssistantCharMask marked = chat_template::assistant_char_mask(*s.chat, messages, s.context(row));
        const tokenizer::TokenizedText tokens = s.tokenizer->encode_with_offsets(marked.text, false);
        ex.input_ids = tokens.ids;
        ex.loss_mask = token_mask_from_bytes(tokens, marked.mask);
        if (!marked.from_generation_blocks) {
          const EndOfTurnCount marked_here = mark_end_of_turn(ex.input_ids, ex.loss_mask, *s.tokenizer);
          const std::lock_guard<std::mutex> lock(s.end_of_turn_mutex);
          s.end_of_turn += marked_here;
        }
      } else {
        ex.input_ids = s.encode(s.chat->render(messages, false, s.context(row)).text, false);
        ex.loss_mask.assign(ex.input_ids.size(), 1);
      }
      return ex;
    }
  }
  return {};
}

namespace {
// Ids index the embedding table and, as targets, the logits: one past vocab_size is out of bounds.
void require_in_vocabulary(const TokenizedExample& ex, int64_t vocab_size, const DatasetRow& row) {
  if (vocab_size <= 0) return;
  for (size_t i = 0; i < ex.input_ids.size(); ++i)
    if (ex.input_ids[i] >= vocab_size)
      throw UserError(row.where() + ": token id " + std::to_string(ex.input_ids[i]) + " at position " + std::to_string(i) +
                      " is outside the model's vocabulary (vocab_size " + std::to_string(vocab_size) +
                      ", ids 0.." + std::to_string(vocab_size - 1) + "): the rows were tokenized for another model");
}
}  // namespace

DatasetSource effective_source(const SftDataOptions& options) {
  if (!options.source.entries.empty()) return options.source;
  DatasetSource source;
  DatasetEntry entry;
  entry.path = options.dataset_name;
  entry.split = options.split;
  entry.origin = "--dataset_name " + options.dataset_name;
  entry.split_option = "--dataset_train_split";
  source.entries.push_back(std::move(entry));
  return source;
}

namespace {
// With a train/test cut, the examples of the chosen side in the cut's order. `example_rows[i]` is the
// reader's row index of example i (rows that tokenized to nothing have no example); `rows` is the
// number of rows read.
void keep_split_side(const DatasetSource& source, uint64_t seed, int64_t rows, const std::vector<int64_t>& example_rows,
                     std::vector<TokenizedExample>& examples) {
  if (!source.test_split_size) return;
  std::vector<int64_t> example_of_row(static_cast<size_t>(rows), -1);
  for (size_t i = 0; i < example_rows.size(); ++i) example_of_row[static_cast<size_t>(example_rows[i])] = static_cast<int64_t>(i);
  std::vector<TokenizedExample> kept;
  for (int64_t row : split_rows(rows, *source.test_split_size, seed, source.test_side, source.origin))
    if (const int64_t e = example_of_row[static_cast<size_t>(row)]; e >= 0) kept.push_back(std::move(examples[static_cast<size_t>(e)]));
  examples = std::move(kept);
}
}  // namespace

SftTokenizedExamples SftDataset::tokenize(const SftDataOptions& options, const tokenizer::Tokenizer* tokenizer) {
  SftTokenizedExamples out;
  const DatasetSource source = effective_source(options);
  DatasetReader reader(resolve_source(source), DatasetReaderOptions{options.skip_bad_rows});
  std::vector<int64_t> example_rows;  // reader row index of each example, for a train/test cut
  std::unique_ptr<RowTokenizer> row_tokenizer;
  const int32_t max_length = static_cast<int32_t>(options.max_length);
  const batching::PackingStrategy strategy = batching::parse_packing_strategy(options.packing_strategy);
  const bool truncate = !(options.packing && strategy == batching::PackingStrategy::kWrapped);
  // TRL 1.16 truncates with truncation_mode only when not packing; its bfd packer keeps the start.
  const batching::TruncationMode mode = options.packing ? batching::TruncationMode::kKeepStart : options.truncation_mode;
  int64_t targets_truncated_away = 0;  // examples whose every trained token lay past max_length
  int64_t masked_by_truncation = 0;    // of them, those left with no mask bit and dropped (not packing)
  int64_t rows_seen = 0;
  // What happens to a tokenized row, in row order whatever the number of threads.
  auto accept = [&](const DatasetRow& row, TokenizedExample ex) {
    require_in_vocabulary(ex, options.vocab_size, row);
    if (ex.input_ids.empty()) return;
    if (truncate && ex.length() > max_length) {
      const bool trained_before = trains_a_token(ex);
      batching::truncate_example(ex, max_length, mode);
      ++out.stats.truncated;
      if (trained_before && !trains_a_token(ex)) ++targets_truncated_away;
      // TRL (not packing) drops what truncation left with no label at all: it would only take a batch slot.
      if (!options.packing && std::find(ex.loss_mask.begin(), ex.loss_mask.end(), 1) == ex.loss_mask.end()) {
        ++masked_by_truncation;
        return;
      }
    }
    example_rows.push_back(row.index);
    out.examples.push_back(std::move(ex));
  };
  // Rows wait here until a batch for the --dataset_num_proc threads is full (one thread: every row at once).
  const int64_t threads = std::max<int64_t>(options.num_proc, 1);
  const size_t batch_rows = threads == 1 ? 1 : static_cast<size_t>(threads * kRowsPerThreadBatch);
  std::vector<DatasetRow> pending;
  auto flush = [&] {
    if (pending.empty()) return;
    const std::vector<DatasetRow> rows = std::move(pending);
    pending.clear();  // taken: a failure below leaves nothing for the error path to flush again
    std::vector<TokenizedExample> done = tokenize_rows_in_order(*row_tokenizer, rows, threads);
    for (size_t i = 0; i < rows.size(); ++i) accept(rows[i], std::move(done[i]));
  };
  DatasetScan scan;
  try {
    scan = scan_dataset(reader, options.text_field, [&](const DatasetRow& row, const DatasetFormSpec& form) {
      if (options.interrupted && rows_seen++ % kInterruptCheckRows == 0 && options.interrupted())  // row 0 too
        throw TokenizationInterrupted();
      if (!row_tokenizer) row_tokenizer = std::make_unique<RowTokenizer>(options, form, tokenizer);
      pending.push_back(row);
      if (pending.size() >= batch_rows) flush();
    });
  } catch (const TokenizationInterrupted&) {
    throw;
  } catch (...) {
    flush();  // a row before the one the reader failed on fails first, as with one thread
    throw;
  }
  flush();
  keep_split_side(source, options.seed, reader.rows_read(), example_rows, out.examples);
  if (out.examples.empty() && masked_by_truncation > 0)
    throw untrainable_dataset(options, masked_by_truncation, masked_by_truncation, "");
  if (out.examples.empty())
    throw UserError("dataset " + options.dataset_name + " produced no non-empty example: check the rows and --dataset_text_field");
  SftDataStats& st = out.stats;
  st.form = dataset_form_name(scan.form.form);
  st.rows_read = scan.rows;
  st.rows_skipped = scan.skipped_malformed + scan.skipped_invalid;
  st.examples = static_cast<int64_t>(out.examples.size());
  if (row_tokenizer) st.end_of_turn = row_tokenizer->end_of_turn();
  for (const TokenizedExample& ex : out.examples) {
    st.tokens += ex.length();
    for (uint8_t m : ex.loss_mask) st.target_tokens += m;
    if (!trains_a_token(ex)) ++st.untrained_examples;
  }
  if (st.untrained_examples == st.examples)
    throw untrainable_dataset(options, st.examples + masked_by_truncation, targets_truncated_away,
                              row_tokenizer->untrained_cause());
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
