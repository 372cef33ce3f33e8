// Greedy KV-cache decoding under tensor parallelism equals transformers' `generate`
// (tests/golden/generate_expected.json, from tests/golden/make_generate_fixtures.py) for the real
// stories260K and the tiny random models of tests/golden (Gemma 2's logits softcapped on each tp rank's
// vocabulary slice before the gather): the tp-sharded model (parallelize() with the world
// split into tp x dp, tp the largest of 8, 4, 2, 1 that divides the world and the model's heads,
// intermediate size and vocabulary) must pick the same tokens as a single process does. With tp above
// the kv heads (qwen2_tiny, qwen3_tiny at tp 4) the ranks share kv heads. np 1 runs tp 1, the same path.
#include <mpi.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "trlhpc/generate/generator.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

std::string model_dir(const std::string& name) {
  if (name.rfind("shared:", 0) == 0) return testing::shared_data_dir() + "/" + name.substr(7);
  return testing::tests_dir() + "/../" + name;
}

bool splits(const ModelConfig& c, int tp) {
  return c.num_attention_heads % tp == 0 && c.intermediate_size % tp == 0 && c.vocab_size % tp == 0 &&
         (c.num_key_value_heads % tp == 0 || tp % c.num_key_value_heads == 0);
}

TEST(GenerateTensorParallel, GreedyEqualsTransformers) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const auto fixture = nlohmann::json::parse(std::ifstream(testing::tests_dir() + "/golden/generate_expected.json"));
  int cases = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string name = c.at("name");
    HfModelDir hf(model_dir(c.at("model")));
    const ModelConfig& config = hf.config();
    int tp = 1;
    for (int candidate : {8, 4, 2})
      if (world % candidate == 0 && splits(config, candidate)) {
        tp = candidate;
        break;
      }
    const ParallelDims dims = ParallelDims{1, -1, 1, 1, tp}.resolved(world).for_model(
        static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
    ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
    auto ops = make_cpu_ops();
    const auto model = parallelize(config, *ops, groups, ParallelizeOptions{});
    model->load_weights(weights_from_hf_dir(hf, model->tp_layout()));
    GenerationOptions options;
    options.max_new_tokens = c.at("max_new_tokens");
    options.eos_token_ids = c.at("eos_token_ids").get<std::vector<int64_t>>();
    const std::vector<int32_t> prompt = c.at("input_ids").get<std::vector<int32_t>>();
    const GenerationResult result = generate(model->decoder(), prompt, options, &groups.world().host());
    EXPECT_EQ(result.tokens, c.at("output_ids").get<std::vector<int32_t>>())
        << name << " at tp " << tp << " (transformers' smallest top-2 logit gap " << c.at("min_margin") << ")";
    ++cases;
  }
  EXPECT_EQ(cases, 19);  // every case of generate_expected.json (Gemma 3 added two, Gemma 2 two more)
}

}  // namespace
}  // namespace trlhpc
