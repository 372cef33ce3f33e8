// The supported families (model_family.hpp): the one list that architecture names, model types,
// error messages and `trlhpc env` read.
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {

std::span<const ModelFamily* const> model_families() {
  static const ModelFamily* const kFamilies[] = {&kLlamaFamily,   &kQwen2Family,   &kQwen3Family, &kMistralFamily,
                                                 &kSmolLM3Family, &kGemma2Family, &kGemma3Family};
  return kFamilies;
}

const ModelFamily& model_family(ModelArchitecture architecture) {
  for (const ModelFamily* family : model_families())
    if (family->architecture == architecture) return *family;
  return kLlamaFamily;  // unreachable: every ModelArchitecture has a family (test_model_config)
}

}  // namespace trlhpc::model_family_detail
