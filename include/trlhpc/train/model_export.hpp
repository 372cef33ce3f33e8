#pragma once
// Writing the trained model as a Hugging Face directory (config.json, model.safetensors, tokenizer
// files): full parameters are gathered where sharded (collective over every rank), then global rank 0
// writes. transformers' AutoModelForCausalLM.from_pretrained loads the result.
#include <string>

#include "trlhpc/core/dtype.hpp"

namespace trlhpc {

class ParallelModel;

// Collective over every rank of the model's groups; `writer` (one rank) writes `output_dir`.
// dtype: model.safetensors' element type (F32 or BF16; config.json's torch_dtype follows it).
// With LoRA adapters: the adapters as a PEFT directory (peft_adapter.hpp: adapter_config.json naming
// `base_model_name`, adapter_model.safetensors) plus the tokenizer files, as TRL saves a PEFT run.
void export_peft_adapter(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                         bool writer, const std::string& base_model_name);
void export_hf_model(ParallelModel& model, const std::string& output_dir, const std::string& tokenizer_dir,
                     bool writer, DType dtype = DType::F32);

}  // namespace trlhpc
