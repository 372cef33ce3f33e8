#include "trlhpc/cli/tokenize_command.hpp"

#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/data/dataset/reader.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

namespace po = boost::program_options;

namespace trlhpc {

using dataset::DatasetFormSpec;
using dataset::DatasetReader;
using dataset::DatasetRow;
using dataset::resolve_dataset_files;
using dataset::RowTokenizer;
using dataset::scan_dataset;
using dataset::SftDataOptions;
using dataset::TokenizedExample;
using tokenizer::Tokenizer;

namespace {

// The decoded row with every run of trained tokens wrapped in [[ ]], decoded run by run.
std::string marked_text(const Tokenizer& tok, const TokenizedExample& ex) {
  std::string out;
  for (size_t begin = 0; begin < ex.input_ids.size();) {
    size_t end = begin;
    while (end < ex.input_ids.size() && ex.loss_mask[end] == ex.loss_mask[begin]) ++end;
    const std::string piece = tok.decode(std::span<const int32_t>(ex.input_ids.data() + begin, end - begin));
    out += ex.loss_mask[begin] ? "[[" + piece + "]]" : piece;
    begin = end;
  }
  return out;
}

nlohmann::ordered_json describe(const Tokenizer& tok, const TokenizedExample& ex, const std::string& text) {
  nlohmann::ordered_json line;
  line["input_ids"] = ex.input_ids;
  std::vector<std::string> pieces;
  for (int32_t id : ex.input_ids) pieces.push_back(tok.id_to_token(id).value_or("<unk:" + std::to_string(id) + ">"));
  line["tokens"] = pieces;
  line["loss_mask"] = ex.loss_mask;
  if (!text.empty()) line["text"] = text;
  return line;
}

}  // namespace

int run_tokenize_command(const std::vector<std::string>& args, MpiEnvironment& mpi, std::istream& in,
                         std::ostream& out) {
  SftDataOptions o;
  std::string completion_only = "auto";
  std::string template_kwargs;  // --chat_template_kwargs JSON
  bool add_special = true;
  bool chat = false;
  po::options_description desc("trlhpc tokenize options");
  desc.add_options()("help,h", "print this help")
      ("tokenizer", po::value<std::string>(&o.tokenizer_dir)->required(), "tokenizer directory")
      ("dataset_name", po::value<std::string>(&o.dataset_name), ".jsonl/.json file or directory (default: text lines on stdin)")
      ("dataset_train_split", po::value<std::string>(&o.split)->default_value(o.split), "")
      ("dataset_text_field", po::value<std::string>(&o.text_field)->default_value(o.text_field), "")
      ("chat_template_path", po::value<std::string>(&o.chat_template_path), "")
      ("chat_template_kwargs", po::value<std::string>(&template_kwargs), "JSON object of chat template variables, e.g. '{\"enable_thinking\": false}'")
      ("max_length", po::value<int64_t>(&o.max_length)->default_value(0), "truncate to this many tokens (0: no truncation)")
      ("completion_only_loss", po::value<std::string>(&completion_only)->default_value("auto"), "true|false|auto")
      ("assistant_only_loss", po::value<bool>(&o.assistant_only_loss)->implicit_value(true)->default_value(false), "")
      ("add_special_tokens", po::value<bool>(&add_special)->default_value(true), "stdin text: add BOS/EOS as the tokenizer does")
      ("chat", po::bool_switch(&chat), "also print \"marked\": the rendered row with trained tokens wrapped in [[ ]]");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc)
                  .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing).run(), vm);
    if (vm.count("help")) {
      if (mpi.world_rank() == 0) out << "usage: trlhpc tokenize --tokenizer DIR [--dataset_name PATH] [options]\n\n" << desc;
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc tokenize: ") + e.what() + " (see trlhpc tokenize --help)");
  }
  o.chat_template_kwargs = chat_template::parse_chat_template_kwargs(template_kwargs, "--chat_template_kwargs");
  if (completion_only == "true") o.completion_only_loss = true;
  else if (completion_only == "false") o.completion_only_loss = false;
  else if (completion_only != "auto") throw UserError("--completion_only_loss " + completion_only + ": use true, false or auto");
  if (mpi.world_rank() != 0) return 0;  // one printer

  const Tokenizer tok = Tokenizer::from_directory(o.tokenizer_dir);
  if (o.dataset_name.empty()) {
    std::string text;
    while (std::getline(in, text)) {
      TokenizedExample ex;
      ex.input_ids = tok.encode(text, add_special);
      ex.loss_mask.assign(ex.input_ids.size(), 1);
      out << describe(tok, ex, "").dump() << "\n";
    }
    return 0;
  }
  DatasetReader reader(resolve_dataset_files(o.dataset_name, o.split));
  std::unique_ptr<RowTokenizer> row_tokenizer;
  scan_dataset(reader, o.text_field, [&](const DatasetRow& row, const DatasetFormSpec& form) {
    if (!row_tokenizer) row_tokenizer = std::make_unique<RowTokenizer>(o, form, &tok);
    TokenizedExample ex = row_tokenizer->tokenize(row);
    if (o.max_length > 0 && ex.length() > o.max_length) {
      ex.input_ids.resize(static_cast<size_t>(o.max_length));
      ex.loss_mask.resize(static_cast<size_t>(o.max_length));
    }
    nlohmann::ordered_json line = describe(tok, ex, row_tokenizer->rendered_text(row));
    if (chat) line["marked"] = marked_text(tok, ex);
    out << line.dump() << "\n";
  });
  return 0;
}

}  // namespace trlhpc
