#pragma once
// Loader for the fixtures written by tests/golden/make_golden.py.
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "trlhpc/data/batch.hpp"

namespace trlhpc {

struct GoldenFixture {
  std::string model_dir, expected_tensors;
  Batch batch;
  int64_t target_tokens = 0;
  double loss = 0;
  nlohmann::json train;  // lr, weight_decay, max_grad_norm, losses, grad_norms

  static GoldenFixture load(const std::string& name) {
    // TRLHPC_GOLDEN_DIR points the tests at freshly generated fixtures (tests/e2e/test_golden_live.sh).
    const char* live = std::getenv("TRLHPC_GOLDEN_DIR");
    const std::string base = (live ? std::string(live) : testing::tests_dir() + "/golden") + "/" + name;
    std::ifstream in(base + "/expected.json");
    if (!in) throw std::runtime_error("missing fixture " + base + "/expected.json (run tests/golden/make_golden.py)");
    const nlohmann::json j = nlohmann::json::parse(in);
    GoldenFixture fx;
    fx.model_dir = base + "/model";
    fx.expected_tensors = base + "/expected.safetensors";
    fx.batch.rows = j["rows"];
    fx.batch.seq_len = j["seq_len"];
    fx.batch.input_ids = j["input_ids"].get<std::vector<int32_t>>();
    fx.batch.targets = j["targets"].get<std::vector<int32_t>>();
    fx.batch.positions = j["positions"].get<std::vector<int32_t>>();
    fx.batch.doc_ids = j["doc_ids"].get<std::vector<int32_t>>();
    fx.target_tokens = j["target_tokens"];
    fx.loss = j["loss"];
    fx.train = j["train"];
    return fx;
  }
};

}  // namespace trlhpc
