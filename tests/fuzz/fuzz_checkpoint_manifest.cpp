// A checkpoint's manifest.json (--resume_from_checkpoint DIR, trlhpc export DIR): read, checked,
// compared with a run's identity and its tensor index (format 2) checked and used, as resuming does
// before any collective.
#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/checkpoint/state_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json identity = nlohmann::json::parse(R"({
    "parameters": [["model.embed_tokens.weight", [64, 16]], ["lm_head.weight", [64, 16]]],
    "model_config": {"hidden_size": 16, "num_hidden_layers": 1},
    "tokenizer_fingerprint": "00000000deadbeef", "dataset": {"rows": 10, "tokens": 100}, "global_batch_size": 4})");
  const std::string dir = (trlhpc::fuzz::scratch_dir() / "checkpoint-1").string();
  trlhpc::fuzz::write_file("checkpoint-1/manifest.json", trlhpc::fuzz::as_text(data, size));
  trlhpc::fuzz::write_file("checkpoint-1/state.h5", "");
  trlhpc::fuzz::expect_user_errors_only([&] {
    const nlohmann::json manifest = trlhpc::checkpoint::read_manifest(dir);
    trlhpc::checkpoint::require_same_identity(dir, manifest.value("identity", nlohmann::json::object()), identity);
    const auto index = trlhpc::checkpoint::StateIndex::from_manifest(dir, manifest);
    for (const char* kind : trlhpc::checkpoint::kStateKinds)
      for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
        const trlhpc::checkpoint::TensorLocation at = index.locate(kind, name);
        if (at.packed) index.packed_dataset_shape(at.dataset);
      }
  });
  return 0;
}
