// gpu_bench: training throughput of the CUDA backend on a Qwen2.5-0.5B-shaped model, plus the bf16 and
// fp32 kernels at that model's shapes.
//
//   gpu_bench [--layers 24] [--seq_len 4096] [--rows 1] [--steps 8] [--warmup 2] [--tf32 | --bf16] [--peak 989e12]
//             [--gradient_checkpointing] [--loss_chunk 1024] [--kernels_only | --skip_kernels] [--out gpu_bench.md]
//             [--json result.json] [--dump_batch batch.json] [--max_doc 2048]
//
// Model: hidden 896, 24 layers, 14 heads, 2 kv heads (head 64), intermediate 4864, vocab 151936, tied
// embeddings, qkv bias (Qwen2.5-0.5B), random init (weights_from_init). Data: packed rows of seq_len
// tokens, documents of 128..2048 tokens with positions restarting, every token a target except the
// last of each document. A step = Decoder::forward_backward + global grad norm + AdamW + zero grads,
// exactly what the trainer does on one rank. Reported: tokens/s, MFU by the trainer's count
// (include/trlhpc/train/flops.hpp: 6 N + causal pairs per document; peak 989 TFLOP/s = H100/H200 dense bf16), peak device memory, and
// GPU time per op (cudaEvent pairs, CudaOpsOptions::time_ops). --bf16: the mixed-precision recipe
// (CudaOpsOptions::compute_dtype BF16: fp32 masters and AdamW, bf16 activations and GEMM operands), as
// `trlhpc sft --bf16`. --json writes tokens_per_second, mfu, peak_memory_gib (in use) and the step's loss
// for scripts (bench/gpu_check). --dump_batch writes the packed batch (input_ids, positions, doc_ids,
// targets) as JSON and exits without touching a GPU: the PyTorch peer (bench/gpu_peer.py --batch) trains
// on exactly these rows.
// The second table times the bf16 and fp32 kernels alone at the model's shapes: attention
// forward/backward (packed documents) and the MLP/QKV/LM-head GEMMs, in TFLOP/s.
#include <cuda_runtime.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "device_query.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/ops/cuda_ops.hpp"
#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/train/flops.hpp"

namespace trlhpc {
namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kBatchSeed = 7;  // the one packed batch every step trains on (and the peer, via --dump_batch)

ModelConfig qwen25_05b_shape(int64_t layers) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Qwen2;
  c.hidden_size = 896;
  c.intermediate_size = 4864;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 14;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 151936;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.qkv_bias = true;
  c.tie_word_embeddings = true;
  return c;
}

// Packed rows: documents of 128..max_doc tokens, positions restarting, next-token targets within a document.
Batch packed_batch(int64_t rows, int64_t seq_len, int64_t vocab, uint64_t seed, int64_t max_doc) {
  std::mt19937_64 gen(seed);
  Batch b;
  b.rows = rows;
  b.seq_len = seq_len;
  const size_t n = static_cast<size_t>(rows * seq_len);
  b.input_ids.resize(n), b.targets.resize(n), b.positions.resize(n), b.doc_ids.resize(n);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = 0;
    int32_t doc = 0;
    while (t < seq_len) {
      const int64_t len = std::min<int64_t>(seq_len - t, 128 + static_cast<int64_t>(gen() % static_cast<uint64_t>(max_doc - 127)));
      for (int64_t i = 0; i < len; ++i) {
        const size_t k = static_cast<size_t>(r * seq_len + t + i);
        b.input_ids[k] = static_cast<int32_t>(gen() % static_cast<uint64_t>(vocab));
        b.positions[k] = static_cast<int32_t>(i);
        b.doc_ids[k] = doc;
      }
      for (int64_t i = 0; i < len; ++i) {
        const size_t k = static_cast<size_t>(r * seq_len + t + i);
        b.targets[k] = i + 1 < len ? b.input_ids[k + 1] : kIgnoreIndex;
      }
      t += len;
      ++doc;
    }
  }
  return b;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

struct Options {
  int64_t layers = 24, seq_len = 4096, rows = 1, steps = 8, warmup = 2, loss_chunk = 1024, max_doc = 2048;
  bool tf32 = false, bf16 = false, checkpointing = false;
  double peak = 989e12;
  std::string out, json, dump_batch, cuda_attention = "auto";
};

// The benchmark's batch for the peer: one JSON object of four int arrays, row-major (rows x seq_len).
void write_batch_json(const Batch& b, const std::string& path) {
  std::ofstream f(path);
  TRLHPC_REQUIRE(f.good(), "gpu_bench: cannot write --dump_batch " + path);
  auto array = [&](const char* name, const std::vector<int32_t>& v) {
    f << "\"" << name << "\": [";
    for (size_t i = 0; i < v.size(); ++i) f << (i ? "," : "") << v[i];
    f << "]";
  };
  f << "{\"rows\": " << b.rows << ", \"seq_len\": " << b.seq_len << ", \"ignore_index\": " << kIgnoreIndex << ", ";
  array("input_ids", b.input_ids);
  f << ", ";
  array("positions", b.positions);
  f << ", ";
  array("doc_ids", b.doc_ids);
  f << ", ";
  array("targets", b.targets);
  f << "}\n";
  TRLHPC_REQUIRE(f.good(), "gpu_bench: writing --dump_batch " + path + " failed (disk full?)");
}

// The full training step at the model shape; returns the report's table rows.
std::string train_step_report(const Options& o) {
  const ModelConfig config = qwen25_05b_shape(o.layers);
  CudaOpsOptions cuda_options;
  cuda_options.allow_tf32 = o.tf32;
  cuda_options.time_ops = true;
  cuda_options.attention = kernels::parse_attention_preference(o.cuda_attention);
  if (o.bf16) cuda_options.compute_dtype = DType::BF16;
  std::unique_ptr<CudaOps> ops = make_cuda_backend(0, cuda_options);
  ParameterStore store(config, *ops);
  load_all_units(weights_from_init(config, 1234), *ops, store);
  Decoder decoder(config, *ops, store, o.checkpointing, o.loss_chunk);
  // Under --bf16 the decoder computes with the units' bf16 compute copies, made here as the training
  // path's strategy makes them after loading and rewritten by every AdamW pass (compute, below), as DDP
  // hands them to the optimizer (without copies every GEMM would round its fp32 weight again).
  store.refresh_compute(*ops);
  std::vector<OptimizerRange> ranges;
  std::vector<Tensor> params, grads, compute;
  for (int u = 0; u < store.num_units(); ++u) {
    ranges.push_back({0, store.unit(u).numel});
    params.push_back(store.unit(u).params.view({store.unit(u).numel}));
    grads.push_back(store.unit(u).grads.view({store.unit(u).numel}));
    compute.push_back(store.has_compute(u) ? store.unit(u).compute.view({store.unit(u).numel}) : Tensor());
  }
  AdamW optimizer(store, ranges, AdamWConfig{0.9f, 0.95f, 1e-8f, 0.1f}, *ops);
  const Batch batch = packed_batch(o.rows, o.seq_len, config.vocab_size, kBatchSeed, o.max_doc);
  const DeviceBatch device_batch = DeviceBatch::upload(batch, *ops);
  const float grad_scale = 1.0f / static_cast<float>(batch.target_tokens());

  auto step = [&]() {
    const LossResult r = decoder.forward_backward(device_batch, grad_scale);
    double sq = 0;
    for (const Tensor& g : grads) sq += ops->sum_of_squares(g);
    const double norm = std::sqrt(sq);
    if (norm > 1.0)
      for (const Tensor& g : grads) ops->scale_inplace(g, static_cast<float>(1.0 / norm));
    optimizer.step(params, grads, 1e-4f, compute);
    store.zero_grads(*ops);
    return r.loss_sum / static_cast<double>(r.target_tokens);
  };
  double loss = 0;
  for (int64_t i = 0; i < o.warmup; ++i) loss = step();
  ops->synchronize();
  ops->reset_op_timings();
  ops->reset_peak_memory();
  const int64_t mallocs = ops->memory_stats().device_mallocs;
  const auto start = Clock::now();
  for (int64_t i = 0; i < o.steps; ++i) loss = step();
  ops->synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(o.steps);
  const DeviceMemoryStats mem = ops->memory_stats();

  const double tokens = static_cast<double>(o.rows * o.seq_len);
  const double tokens_per_s = tokens / seconds;
  // The trainer's count (flops.hpp): 6 N per token plus the causal pairs of this packing's documents.
  const double mfu = training_flops(config, o.rows * o.seq_len, attended_pairs(config, batch)) / seconds / o.peak;
  std::ostringstream os;
  if (!o.json.empty()) {
    std::ofstream j(o.json);
    j << "{\"tokens_per_second\": " << tokens_per_s << ", \"mfu\": " << mfu << ", \"peak_memory_gib\": "
      << static_cast<double>(mem.peak_in_use_bytes) / (1 << 30) << ", \"peak_reserved_gib\": "
      << static_cast<double>(mem.peak_reserved_bytes) / (1 << 30) << ", \"step_seconds\": " << seconds
      << ", \"loss\": " << loss << ", \"precision\": \"" << (o.bf16 ? "bf16" : o.tf32 ? "tf32" : "fp32")
      << "\", \"layers\": " << o.layers << ", \"rows\": " << o.rows << ", \"seq_len\": " << o.seq_len
      << ", \"cudnn_attention_calls\": " << ops->cudnn_attention_calls() << "}\n";
    TRLHPC_REQUIRE(j.good(), "gpu_bench: cannot write --json " + o.json);
  }
  os << "## Training step (" << (o.bf16 ? "bf16 mixed precision" : "fp32") << " Decoder" << (o.tf32 ? ", TF32 GEMMs" : "") << (o.checkpointing ? ", checkpointing" : "")
     << ")\n\n"
     << "| model | tokens/step | step s | tokens/s | MFU | peak in use GiB | peak reserved GiB | cudaMalloc in loop | loss |\n"
     << "|---|---|---|---|---|---|---|---|---|\n"
     << "| Qwen2.5-0.5B shape, " << o.layers << " layers | " << o.rows << "x" << o.seq_len << " | " << fixed(seconds, 3)
     << " | " << fixed(tokens_per_s, 0) << " | " << fixed(100 * mfu, 1) << "% | "
     << fixed(static_cast<double>(mem.peak_in_use_bytes) / (1 << 30), 2) << " | "
     << fixed(static_cast<double>(mem.peak_reserved_bytes) / (1 << 30), 2) << " | " << mem.device_mallocs - mallocs
     << " | " << fixed(loss, 4) << " |\n\n"
     << "GPU time per step by op:\n\n| op | calls/step | ms/step | share |\n|---|---|---|---|\n";
  const std::vector<OpTiming> timings = ops->op_timings();
  double total = 0;
  for (const OpTiming& t : timings) total += t.milliseconds;
  for (const OpTiming& t : timings)
    os << "| " << t.name << " | " << t.calls / o.steps << " | " << fixed(t.milliseconds / static_cast<double>(o.steps), 2)
       << " | " << fixed(100 * t.milliseconds / total, 1) << "% |\n";
  return os.str();
}

// GPU time of `fn` in ms (median of `reps` timed runs after one warm-up).
double time_ms(CudaOps& ops, int reps, const std::function<void()>& fn) {
  fn();
  ops.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    ops.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// bf16 and fp32 kernels alone at the model's shapes.
std::string kernel_report(const Options& o) {
  std::unique_ptr<CudaOps> ops = make_cuda_backend(0);
  const ModelConfig c = qwen25_05b_shape(o.layers);
  const int64_t N = o.rows * o.seq_len, C = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const int64_t NH = c.num_attention_heads, KVH = c.num_key_value_heads, HS = c.head_dim;
  const Batch batch = packed_batch(o.rows, o.seq_len, V, kBatchSeed, o.max_doc);
  const DeviceBatch db = DeviceBatch::upload(batch, *ops);
  // Causal attention FLOPs actually done on this packing: 4 HS per allowed (query, key) pair and head (fwd).
  double pairs = 0;
  for (int64_t r = 0; r < o.rows; ++r)
    for (int64_t t = 0; t < o.seq_len; ++t) pairs += batch.positions[static_cast<size_t>(r * o.seq_len + t)] + 1;
  const double attn_fwd_flops = 4.0 * static_cast<double>(HS * NH) * pairs;
  std::ostringstream os;
  os << "## Kernels at the model's shapes (N = " << N << " tokens)\n\n"
     << "| kernel | dtype | ms | TFLOP/s (useful) |\n|---|---|---|---|\n";
  for (DType dtype : {DType::BF16, DType::F32}) {
    auto fill = [&](const Shape& shape, DType dt) {
      Tensor t = ops->allocate(shape, dt);
      Tensor f32 = ops->allocate(shape);
      std::vector<float> host(static_cast<size_t>(shape_numel(shape)));
      std::mt19937 gen(static_cast<uint32_t>(shape_numel(shape)));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (float& x : host) x = u(gen);
      ops->copy_from_host(f32, host.data(), host.size() * sizeof(float));
      ops->cast(t, f32);
      return t;
    };
    const Tensor q = fill({N, NH * HS}, dtype), k = fill({N, KVH * HS}, dtype), v = fill({N, KVH * HS}, dtype);
    Tensor out = ops->allocate({N, NH * HS}, dtype), lse = ops->allocate({N * NH});
    const Tensor dout = fill({N, NH * HS}, dtype);
    Tensor dq = ops->zeros({N, NH * HS}, dtype), dk = ops->zeros({N, KVH * HS}, dtype), dv = ops->zeros({N, KVH * HS}, dtype);
    const AttentionShape s{o.rows, o.seq_len, o.seq_len, NH, KVH, HS, 0.125f};
    const char* name = dtype == DType::BF16 ? "bf16" : "fp32";
    const double fwd = time_ms(*ops, 5, [&] {
      ops->attention_fwd(q, k, v, db.positions, db.positions, db.doc_ids, db.doc_ids, out, lse, s);
    });
    const double bwd = time_ms(*ops, 5, [&] {
      ops->attention_bwd(q, k, v, out, lse, dout, db.positions, db.positions, db.doc_ids, db.doc_ids, dq, dk, dv, s);
    });
    os << "| attention fwd (packed docs) | " << name << " | " << fixed(fwd, 3) << " | "
       << fixed(attn_fwd_flops / fwd / 1e9, 1) << " |\n";
    os << "| attention bwd (packed docs) | " << name << " | " << fixed(bwd, 3) << " | "
       << fixed(2.5 * attn_fwd_flops / bwd / 1e9, 1) << " |\n";
    struct Gemm {
      const char* what;
      int64_t M, N, K;
    };
    for (const Gemm& g : {Gemm{"x W_gate^T (N,C)x(C,F)", N, F, C}, Gemm{"act W_down^T (N,F)x(F,C)", N, C, F},
                          Gemm{"x W_qkv^T (N,C)x(C,1152)", N, (NH + 2 * KVH) * HS, C},
                          Gemm{"LM head chunk (1024,C)x(C,V)", std::min<int64_t>(N, 1024), V, C}}) {
      const Tensor a = fill({g.M, g.K}, dtype), b = fill({g.N, g.K}, dtype);
      Tensor cc = ops->allocate({g.M, g.N}, DType::F32);
      const double ms = time_ms(*ops, 5, [&] { ops->matmul(a, false, b, true, cc, 1.0f, 0.0f); });
      os << "| GEMM " << g.what << " | " << name << " | " << fixed(ms, 3) << " | "
         << fixed(2.0 * g.M * g.N * g.K / ms / 1e9, 1) << " |\n";
    }
  }
  return os.str();
}

int run(int argc, char** argv) {
  Options o;
  po::options_description desc("gpu_bench options");
  desc.add_options()("help", "this help")("layers", po::value(&o.layers)->default_value(24), "decoder layers")(
      "seq_len", po::value(&o.seq_len)->default_value(4096), "tokens per packed row")(
      "rows", po::value(&o.rows)->default_value(1), "rows per micro-batch")(
      "max_doc", po::value(&o.max_doc)->default_value(2048), "longest packed document (documents: 128..max_doc tokens)")(
      "steps", po::value(&o.steps)->default_value(8), "timed steps")(
      "warmup", po::value(&o.warmup)->default_value(2), "untimed steps first")(
      "loss_chunk", po::value(&o.loss_chunk)->default_value(1024), "LM-head chunk tokens")(
      "tf32", po::bool_switch(&o.tf32), "fp32 GEMMs on TF32 tensor cores")(
      "bf16", po::bool_switch(&o.bf16), "bf16 mixed precision (fp32 masters, bf16 compute)")(
      "json", po::value(&o.json), "also write the training step's figures as JSON to this file")(
      "dump_batch", po::value(&o.dump_batch), "write the packed batch as JSON and exit (no GPU needed)")(
      "gradient_checkpointing", po::bool_switch(&o.checkpointing), "recompute layers in backward")(
      "peak", po::value(&o.peak)->default_value(989e12), "peak FLOP/s for MFU")(
      "cuda_attention", po::value(&o.cuda_attention)->default_value("auto"), "auto|cudnn|kernel (trlhpc sft's option)")(
      "kernels_only", "skip the training step")("skip_kernels", "skip the per-kernel table")("out", po::value(&o.out), "also write the report to this file");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (o.max_doc < 128) {
    std::cerr << "gpu_bench: --max_doc " << o.max_doc << " is below the shortest document (128 tokens)\n";
    return 2;
  }
  try {
    kernels::parse_attention_preference(o.cuda_attention);
  } catch (const std::invalid_argument& e) {
    std::cerr << "gpu_bench: " << e.what() << "\n";
    return 2;
  }
  if (o.tf32 && o.bf16) {
    std::cerr << "gpu_bench: --tf32 and --bf16 exclude each other (bf16 GEMMs do not use TF32)\n";
    return 2;
  }
  if (!o.dump_batch.empty()) {
    write_batch_json(packed_batch(o.rows, o.seq_len, qwen25_05b_shape(o.layers).vocab_size, kBatchSeed, o.max_doc), o.dump_batch);
    std::cout << "gpu_bench: wrote the " << o.rows << "x" << o.seq_len << " packed batch to " << o.dump_batch << "\n";
    return 0;
  }
  if (cuda::visible_device_count() == 0) {
    std::cerr << "gpu_bench: no CUDA device visible (" << cuda::runtime_version_string() << ")\n";
    return 3;
  }
  std::ostringstream report;
  report << "# gpu_bench on " << cuda::device_name(0) << " (" << cuda::runtime_version_string() << ")\n\n";
  if (!vm.count("kernels_only")) report << train_step_report(o) << "\n";
  if (!vm.count("skip_kernels")) report << kernel_report(o);
  std::cout << report.str();
  if (!o.out.empty()) std::ofstream(o.out) << report.str();
  return 0;
}

}  // namespace
}  // namespace trlhpc

int main(int argc, char** argv) {
  // Link-order workaround: libtrlhpc_cuda.a (after libtrlhpc_lib.a on the link line) needs Ops's type
  // info, which lives in src/ops/ops_defaults.cpp; naming it here pulls that object in. Not needed once
  // cmake/cuda.cmake declares trlhpc_cuda's dependency on trlhpc_lib (a static-library cycle).
  const std::type_info* volatile ops_type = &typeid(trlhpc::Ops);
  static_cast<void>(ops_type);
  try {
    return trlhpc::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpu_bench: " << e.what() << "\n";
    return 2;
  }
}
