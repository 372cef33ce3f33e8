#include "trlhpc/train/model_export.hpp"

#include "trlhpc/io/hf_model_dir.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {

void export_hf_model(Trainer& trainer, const ModelConfig& config, const std::string& output_dir,
                     const std::string& tokenizer_dir, bool writer, ProcessGroups& groups) {
  trainer.strategy().gather_full_parameters();
  if (writer) {
    ParameterStore& store = trainer.store();
    Ops& ops = trainer.ops();
    HfSaveOptions options;
    options.tokenizer_source_dir = tokenizer_dir;
    save_hf_model_dir(output_dir, config, [&](const ParameterSpec& spec, float* out) {
      const Tensor t = store.param(spec.name);
      ops.copy_to_host(out, t, t.nbytes());
    }, options);
  }
  trainer.strategy().release_full_parameters();
  groups.world().comm().barrier();  // nobody reports success before the files exist
}

}  // namespace trlhpc
