#pragma once
// Writing the trained model as a Hugging Face directory (config.json, model.safetensors, tokenizer
// files): full parameters are gathered where sharded (collective over every rank), then global rank 0
// writes. transformers' AutoModelForCausalLM.from_pretrained loads the result.
#include <string>

namespace trlhpc {

class ParallelModel;

// Collective over every rank of the model's groups; `writer` (one rank) writes `output_dir`.
void export_hf_model(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                     bool writer);

}  // namespace trlhpc
