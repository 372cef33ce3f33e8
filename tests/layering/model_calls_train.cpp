// Layering probe (tests/layering/test_layering.sh): code placed in the `model` area that calls into
// `train`, an arrow the architecture forbids (train builds on model, never the reverse).
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/train/flops.hpp"

namespace trlhpc::layering_probe {
double model_asks_train(const ModelConfig& config) { return training_flops_per_token(config, 128); }
}  // namespace trlhpc::layering_probe
