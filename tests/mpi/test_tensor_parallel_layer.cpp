// Layer-level tensor parallel (issue 6): one decoder layer (with its embedding, final norm and
// vocab-parallel head around it) run whole on every rank vs. split over tp = world size ranks.
// The same weights (each tp rank loads its slices of the same deterministic init) and the same packed
// batch (two rows, documents crossing no boundary but padding and a masked prompt) go through one
// forward + backward; then on every rank
//   outputs    the layer's output (the residual stream after it, every token), the loss and every
//              logit (tp ranks' vocabulary columns gathered) equal the whole layer's;
//   gradients  every tp-local gradient tensor equals its slice of the whole layer's gradient
//              (column/row/vocab slices, and the summed gradient of a kv head replicated on tp/KVH ranks).
// With and without --tp_sequence_parallel (norms and residual stream split over tp), with and without
// biases and tied embeddings, KVH 2 so that tp 4 and 8 replicate kv heads.
// Bound: normalised error ||got - want|| / ||want|| <= 1e-5 per tensor, loss relative 1e-6: tp changes
// only the fp32 summation order of the split contractions (measured worst printed as "[tp-layer]").
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "test_data_parallel_support.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/train/parallelize.hpp"

namespace trlhpc {
namespace {

ModelConfig one_layer(bool biases, bool tied) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.vocab_size = 64;
  c.max_position_embeddings = 64;
  c.qkv_bias = c.o_bias = c.mlp_bias = biases;
  c.tie_word_embeddings = tied;
  c.initializer_range = 0.2;  // large weights: gradients far from zero, so the relative bound is meaningful
  return c;
}

// What one forward + backward produced on this rank: loss, full logits (N, V), every local gradient.
struct LayerResult {
  double loss_sum = 0;
  std::vector<float> layer_output;  // (N, C)
  std::vector<float> logits;
  std::vector<std::vector<float>> grads;  // in parameter_specs order of this rank's layout
  std::vector<ParameterSpec> specs;
};

// The model laid out over `groups` (parallelize: tp slices, kv-share group, tp sequence parallel as
// the mesh says; DDP over a dp group of one, whose all-reduce leaves the gradients as they are).
LayerResult run_layer(const ModelConfig& config, ProcessGroups& groups, const Batch& batch) {
  auto ops = make_cpu_ops();
  ParallelizeOptions options;
  options.loss_chunk_tokens = 5;
  const std::unique_ptr<ParallelModel> model = parallelize(config, *ops, groups, options);
  model->load_weights(weights_from_init(config, 11, model->tp_layout()));
  ParameterStore& store = model->store();
  Decoder& decoder = model->decoder();
  const DeviceBatch device = DeviceBatch::upload(batch, *ops);
  LayerResult r;
  model->strategy().begin_micro_step(/*last_micro_step=*/true);
  r.loss_sum = decoder.forward_backward(device, 1.0f / static_cast<float>(batch.target_tokens())).loss_sum;
  model->strategy().finish_gradients();
  for (const ParameterUnit& unit : store.units())
    for (const ParameterSlot& slot : unit.slots) {
      std::vector<float> g(static_cast<size_t>(slot.numel));
      ops->copy_to_host(g.data(), store.grad(slot.spec.name), g.size() * sizeof(float));
      r.grads.push_back(std::move(g));
      r.specs.push_back(slot.spec);
    }
  const Tensor layer_output = decoder.layer_stack_output(device);
  r.layer_output.resize(static_cast<size_t>(layer_output.numel()));
  ops->copy_to_host(r.layer_output.data(), layer_output, r.layer_output.size() * sizeof(float));
  const Tensor logits = decoder.logits(device);
  r.logits.resize(static_cast<size_t>(logits.numel()));
  ops->copy_to_host(r.logits.data(), logits, r.logits.size() * sizeof(float));
  return r;
}

// The elements of the whole tensor `full` that tp rank `tp` holds of `local`, in local order.
std::vector<float> tp_slice(const ParameterSpec& local, TpLayout tp, const std::vector<float>& full) {
  std::vector<float> out(static_cast<size_t>(local.numel()));
  for_each_tp_global_range(local, tp, 0, local.numel(), [&](int64_t gb, int64_t ge, int64_t off) {
    std::copy(full.begin() + gb, full.begin() + ge, out.begin() + off);
  });
  return out;
}

void expect_layer_matches(bool biases, bool tied, bool sequence_parallel) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const ModelConfig config = one_layer(biases, tied);
  const std::string name = std::string(biases ? "biases" : "no biases") + (tied ? ", tied" : ", untied") +
                           (sequence_parallel ? ", sequence parallel" : "") + ", tp " + std::to_string(world);
  // Two rows of 12 tokens: N = 24 splits over tp 1, 2, 4, 8 (sequence parallel needs N % tp == 0).
  const Batch batch = testing::concat_rows({testing::synthetic_row(12, config.vocab_size, 3, 0, 0),
                                            testing::synthetic_row(12, config.vocab_size, 3, 0, 1)});
  ASSERT_GT(batch.target_tokens(), 0);

  ProcessGroups self(Mesh(ParallelDims{}.resolved(1)), MPI_COMM_SELF);
  const LayerResult whole = run_layer(config, self, batch);

  ParallelDims dims;
  dims.dp_shard = 1;
  dims.tp = world;
  dims.tp_sequence_parallel = sequence_parallel;
  ProcessGroups groups(Mesh(dims.resolved(world).for_model(static_cast<int>(config.num_attention_heads),
                                                           static_cast<int>(config.num_key_value_heads))),
                       MPI_COMM_WORLD);
  const TpLayout tp{groups.tp().size(), groups.tp().rank()};
  const LayerResult split = run_layer(config, groups, batch);

  double worst = 0;
  EXPECT_LE(testing::relative_difference(split.loss_sum, whole.loss_sum), 1e-6) << name << ": loss";
  const double dx = testing::normalized_error(split.layer_output, whole.layer_output);
  worst = std::max(worst, dx);
  EXPECT_LE(dx, 1e-5) << name << ": layer output";
  const double dl = testing::normalized_error(split.logits, whole.logits);
  worst = std::max(worst, dl);
  EXPECT_LE(dl, 1e-5) << name << ": logits";
  ASSERT_EQ(split.specs.size(), whole.specs.size());
  for (size_t i = 0; i < split.specs.size(); ++i) {
    const ParameterSpec& local = split.specs[i];
    ASSERT_EQ(local.name, whole.specs[i].name);
    ASSERT_EQ(shape_numel(tp_full_shape(local, tp.size)), whole.specs[i].numel()) << local.name;
    const std::vector<float> want = tp_slice(local, tp, whole.grads[i]);
    const double dg = testing::normalized_error(split.grads[i], want);
    worst = std::max(worst, dg);
    EXPECT_LE(dg, 1e-5) << name << ": gradient of " << local.name << " on tp rank " << tp.rank;
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("[tp-layer] %s: worst normalised error %.3g\n", name.c_str(), worst);
}

TEST(TensorParallelLayer, OutputsAndGradientShardsMatchTheWholeLayer) {
  for (bool sequence_parallel : {false, true}) {
    expect_layer_matches(/*biases=*/true, /*tied=*/false, sequence_parallel);
    expect_layer_matches(/*biases=*/false, /*tied=*/true, sequence_parallel);
  }
}

}  // namespace
}  // namespace trlhpc
