#pragma once
// Writing the trained model as a Hugging Face directory (config.json, model.safetensors, tokenizer
// files): full parameters are gathered where sharded (collective over every rank), then global rank 0
// writes. transformers' AutoModelForCausalLM.from_pretrained loads the result.
#include <string>

namespace trlhpc {

class Trainer;
class ProcessGroups;
struct ModelConfig;

void export_hf_model(Trainer& trainer, const ModelConfig& config, const std::string& output_dir,
                     const std::string& tokenizer_dir, bool writer, ProcessGroups& groups);

}  // namespace trlhpc
