#include "trlhpc/cli/generate_command.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/peft_adapter.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/generate/generator.hpp"
#include "trlhpc/generate/prompt.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/ops/backend.hpp"
#include "trlhpc/comm/backend_communicators.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

struct GenerateOptions {
  std::string model, tokenizer, prompt, messages, chat_template_path, chat_template_kwargs, device = "auto";
  bool raw_prompt = false, json = false, help = false;
  int64_t tp_size = 0;  // 0: the world size
  GenerationOptions generation;
};

GenerateOptions parse(const std::vector<std::string>& args, std::string* help) {
  namespace po = boost::program_options;
  GenerateOptions o;
  SamplingOptions& s = o.generation.sampling;
  po::options_description desc("usage: trlhpc generate MODEL [--prompt TEXT | --messages JSON] [options]\n"
                               "MODEL: a Hugging Face model directory or a checkpoint-N folder");
  desc.add_options()
      ("help,h", po::bool_switch(&o.help), "print this help")
      ("model_name_or_path", po::value<std::string>(&o.model), "the model (or give it first, unnamed)")
      ("tokenizer", po::value<std::string>(&o.tokenizer), "tokenizer directory (default: MODEL)")
      ("prompt", po::value<std::string>(&o.prompt), "text to continue; a user message when the tokenizer has a chat template")
      ("messages", po::value<std::string>(&o.messages), "a conversation: JSON list of {role, content}, or a .json file holding one")
      ("chat_template_path", po::value<std::string>(&o.chat_template_path), "Jinja chat template overriding the tokenizer's")
      ("chat_template_kwargs", po::value<std::string>(&o.chat_template_kwargs),
       "JSON object of chat template variables, e.g. '{\"enable_thinking\": false}' (Qwen3: answer without thinking)")
      ("raw_prompt", po::bool_switch(&o.raw_prompt), "encode --prompt as plain text even when there is a chat template")
      ("max_new_tokens", po::value<int64_t>(&o.generation.max_new_tokens)->default_value(o.generation.max_new_tokens), "")
      ("do_sample", po::bool_switch(&s.do_sample), "sample (with the flags below) instead of greedy decoding")
      ("temperature", po::value<double>(&s.temperature)->default_value(s.temperature), "with --do_sample")
      ("top_k", po::value<int64_t>(&s.top_k)->default_value(s.top_k), "with --do_sample; 0: off")
      ("top_p", po::value<double>(&s.top_p)->default_value(s.top_p), "with --do_sample; 1: off")
      ("seed", po::value<uint64_t>(&s.seed)->default_value(s.seed), "with --do_sample")
      ("tp_size", po::value<int64_t>(&o.tp_size)->default_value(0), "tensor-parallel ranks (0: all ranks of the job)")
      ("device", po::value<std::string>(&o.device)->default_value(o.device), "auto|cpu|cuda (auto: cuda when every node sees a GPU)")
      ("json", po::bool_switch(&o.json), "print one JSON object: input_ids, output_ids, output_logprobs, text, finish_reason");
  po::positional_options_description positional;
  positional.add("model_name_or_path", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc generate: ") + e.what() + " (see trlhpc generate --help)");
  }
  std::ostringstream text;
  text << desc;
  *help = text.str();
  if (o.help) return o;
  if (o.model.empty()) throw UserError("trlhpc generate: name the model (trlhpc generate MODEL --prompt TEXT)");
  if (o.prompt.empty() == o.messages.empty()) throw UserError("trlhpc generate: give exactly one of --prompt and --messages");
  if (o.tp_size < 0) throw UserError("--tp_size " + std::to_string(o.tp_size) + ": must be >= 0 (0: all ranks)");
  return o;
}

nlohmann::ordered_json read_messages(const std::string& value) {
  std::string text = value;
  if (std::filesystem::is_regular_file(value)) {
    std::ifstream in(value);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto messages = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded()) throw UserError("--messages: not valid JSON (nor a readable file): " + value);
  return messages;
}

// transformers' generate stops at generation_config.json's eos_token_id (an int or a list) when the
// model directory has one, else at config.json's.
std::vector<int64_t> eos_token_ids(const std::string& model_dir, const ModelConfig& config) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  if (std::filesystem::exists(path)) {
    const auto j = nlohmann::json::parse(std::ifstream(path), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.contains("eos_token_id")) {
      const auto& eos = j.at("eos_token_id");
      if (eos.is_number_integer()) return {eos.get<int64_t>()};
      if (eos.is_array()) return eos.get<std::vector<int64_t>>();
      if (eos.is_null()) return {};
    }
  }
  return config.eos_token_ids;
}

}  // namespace

int run_generate_command(const std::vector<std::string>& args, MpiEnvironment& mpi) {
  std::string help;
  GenerateOptions o = parse(args, &help);
  if (o.help) {
    if (mpi.world_rank() == 0) std::printf("%s\n", help.c_str());
    return 0;
  }
  // Everything that can be wrong with the input is found here, from files every rank reads the same.
  const bool is_checkpoint = std::filesystem::exists(std::filesystem::path(o.model) / checkpoint::kManifestFile);
  nlohmann::json manifest;
  std::optional<HfModelDir> hf;
  std::optional<PeftAdapterDir> adapter;  // a PEFT LoRA adapter: its base with the adapter merged in
  LoraTargets adapter_targets;
  ModelConfig config;
  std::string model_files = o.model;  // where config/generation files are read
  if (!is_checkpoint && is_peft_adapter_dir(o.model)) {
    adapter.emplace(o.model);
    if (adapter->base_model_dir().empty())
      throw UserError(o.model + "/" + kPeftConfigFile + ": base_model_name_or_path \"" + adapter->base_model_name() +
                      "\" is not a model directory (as given, or relative to the adapter)");
    hf.emplace(adapter->base_model_dir());
    adapter_targets = resolve_lora_targets(hf->config(), adapter->lora());
    adapter->check_weights(hf->config(), adapter_targets);
    config = lora_merged_config(hf->config(), adapter->lora());  // untied when a copy replaced the tied head
    if (!std::filesystem::exists(std::filesystem::path(o.model) / "generation_config.json"))
      model_files = adapter->base_model_dir();
  } else if (is_checkpoint) {
    manifest = checkpoint::read_manifest(o.model);
    if (manifest.at("identity").contains("lora"))
      throw UserError(o.model + " is a checkpoint of a LoRA run (adapters only): export its adapter with `trlhpc export " +
                      o.model + " --output_dir DIR`, then `trlhpc generate DIR`");
    config = ModelConfig::from_json(manifest.at("identity").at("model_config"),
                                    (std::filesystem::path(o.model) / checkpoint::kManifestFile).string());
  } else {
    hf.emplace(o.model);
    config = hf->config();
  }
  // An adapter saved by a training run carries its tokenizer; a bare one uses its base's.
  const std::string tokenizer_dir =
      !o.tokenizer.empty() ? o.tokenizer
      : adapter && !std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json") ? adapter->base_model_dir()
                                                                                                : o.model;
  const PromptSource source{tokenizer_dir, o.chat_template_path, o.raw_prompt,
                            chat_template::parse_chat_template_kwargs(o.chat_template_kwargs, "--chat_template_kwargs")};
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_directory(source.tokenizer_dir);
  const std::vector<int32_t> prompt = o.messages.empty() ? text_prompt_ids(o.prompt, source, tokenizer)
                                                         : chat_prompt_ids(read_messages(o.messages), source, tokenizer);
  o.generation.eos_token_ids = eos_token_ids(model_files, config);
  // Before any allocation: the KV cache holds prompt + max_new_tokens positions (1e9 tried 128 GB).
  if (const std::string warning = check_generation_length(config, static_cast<int64_t>(prompt.size()),
                                                          o.generation.max_new_tokens);
      !warning.empty() && mpi.world_rank() == 0)
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  ParallelDims requested;
  requested.tp = static_cast<int>(o.tp_size > 0 ? o.tp_size : mpi.world_size());
  const ParallelDims dims = requested.resolved(mpi.world_size())
                                .for_model(static_cast<int>(config.num_attention_heads),
                                           static_cast<int>(config.num_key_value_heads));
  validate_tensor_parallel(config, dims.tp);

  const Topology topology = Topology::discover(mpi, parse_device_request(o.device));
  const std::unique_ptr<Ops> ops = make_ops(topology);
  ProcessGroups groups(Mesh(dims), mpi.world(), {}, backend_communicators(topology, *ops, mpi.world()).factory);
  const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, ParallelizeOptions{});
  if (is_checkpoint) checkpoint::load_checkpoint_parameters(o.model, manifest, *model);
  else if (adapter)
    model->load_weights(merged_weights_from_hf_dir(*hf, adapter->weights(), adapter->lora(), adapter_targets,
                                                   model->tp_layout()));
  else model->load_weights(weights_from_hf_dir(*hf, model->tp_layout()));

  const GenerationResult result = generate(model->decoder(), prompt, o.generation, &groups.world().host());
  if (mpi.world_rank() != 0) return 0;
  const std::string text = tokenizer.decode(result.tokens, /*skip_special_tokens=*/true);
  if (o.json) {
    const nlohmann::json line = {{"input_ids", prompt},
                                 {"output_ids", result.tokens},
                                 {"output_logprobs", result.logprobs},
                                 {"text", text},
                                 {"finish_reason", result.stopped_at_eos ? "stop" : "length"}};
    std::printf("%s\n", line.dump().c_str());
  } else {
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace trlhpc
