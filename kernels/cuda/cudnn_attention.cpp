// cuDNN fused SDPA for trlhpc's attention op (cudnn_attention.hpp has the mapping of the mask).
//
// API choice: cudnn-frontend, the header-only C++ graph API NVIDIA ships on top of cuDNN's backend (MIT;
// PyPI's nvidia-cudnn-frontend installs the headers under site-packages/include, found by
// cmake/cuda.cmake). Through the raw backend API (cudnn_graph.h) the SDPA forward and backward are graphs
// of dozens of matmul/pointwise/reduction descriptors that must match cuDNN's fused patterns exactly; the
// frontend builds those patterns, validates them against the running cuDNN and picks engines by
// heuristics. Without the headers this file compiles to stubs (built() == false), the build is as before
// and every call takes the hand-written kernel.
//
// Host C++ compiled by g++, not nvcc: the frontend's headers are heavy (nlohmann::json inside) and nvcc
// 13 takes about twice as long on them and warns throughout; nothing here is device code (the layout
// glue kernels are in cudnn_attention_glue.cu).
//
// Compiled, never run: no GPU was available where this was written. tests/cuda/test_attention_cudnn.cpp
// and the GPU check (docs/GPU-CHECK.md) are the first execution.
#include "cudnn_attention.hpp"

#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cudnn_attention_glue.cuh"
#include "trlhpc/core/cuda_check.hpp"

#if TRLHPC_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include "trlhpc/kernels/matmul_plan_cache.hpp"  // BoundedLru
#endif

namespace trlhpc::cuda {

#if TRLHPC_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;
using bf16 = __nv_bfloat16;

namespace {

// Tensor uids: the variant pack at execution is keyed by them, so a cached graph needs no tensor handles.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeqLenQ, kSeqLenKV, kOffsetQ, kOffsetKV };

struct HandleDeleter {
  void operator()(cudnnHandle_t h) const {
    if (h) cudnnDestroy(h);  // never throws: teardown may run after the driver is gone
  }
};
using Handle = std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, HandleDeleter>;

// Everything a graph's shape depends on. sequences and max_length are the bucketed graph dimensions;
// total_tokens bounds the ragged token axis (the frontend sizes its ragged workspace by it); device:
// a plan is built for one device's architecture.
struct GraphKey {
  bool backward = false;
  int device = 0;
  int64_t sequences = 0, max_length = 0, total_tokens = 0;
  int NH = 0, KVH = 0, HS = 0;
  uint32_t scale_bits = 0;
  int64_t window = 0;
  auto tie() const {
    return std::tie(backward, device, sequences, max_length, total_tokens, NH, KVH, HS, scale_bits, window);
  }
  bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
};

std::string describe(const GraphKey& k) {
  return std::string(k.backward ? "bwd" : "fwd") + " sequences=" + std::to_string(k.sequences) +
         " max_len=" + std::to_string(k.max_length) + " tokens=" + std::to_string(k.total_tokens) +
         " heads=" + std::to_string(k.NH) + "/" + std::to_string(k.KVH) + " hs=" + std::to_string(k.HS) +
         " window=" + std::to_string(k.window);
}

void check(fe::error_t e, const char* what) {
  if (e.is_good()) return;
  throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " + e.get_message());
}

// Builds the graph, or returns nullptr with `why` when cuDNN offers no plan (the caller falls back).
std::shared_ptr<fe::graph::Graph> build_graph(const GraphKey& k, float scale, cudnnHandle_t handle, std::string& why) {
  using fe::graph::Tensor_attributes;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = k.sequences, s = k.max_length, hs = k.HS;

  auto index = [&](const char* name, int64_t uid, int64_t n) {
    return g->tensor(Tensor_attributes().set_name(name).set_uid(uid).set_dim({n, 1, 1, 1}).set_stride({1, 1, 1, 1})
                         .set_data_type(fe::DataType_t::INT32));
  };
  auto seq_len_q = index("seq_len_q", kSeqLenQ, b);
  auto seq_len_kv = index("seq_len_kv", kSeqLenKV, b);
  auto offset_q = index("ragged_offset_q", kOffsetQ, b + 1);
  auto offset_kv = index("ragged_offset_kv", kOffsetKV, b + 1);

  // (sequence, head, token, dim) over trlhpc's (B*T, heads, HS) storage: the token stride is heads*HS,
  // the head stride HS; where each sequence starts comes from its ragged offset (elements), so the
  // sequence stride is nominal.
  auto dims = [&](int heads) { return std::vector<int64_t>{b, heads, s, hs}; };
  auto strides = [&](int heads) { return std::vector<int64_t>{s * heads * hs, hs, heads * hs, 1}; };
  auto io = [&](const char* name, int64_t uid, int heads, const std::shared_ptr<Tensor_attributes>& offset) {
    return g->tensor(
        Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims(heads)).set_stride(strides(heads)).set_ragged_offset(offset));
  };
  const std::vector<int64_t> stats_dim = {b, k.NH, s, 1}, stats_stride = {k.NH * s, s, 1, 1};

  auto q = io("Q", kQ, k.NH, offset_q), kk = io("K", kK, k.KVH, offset_kv), v = io("V", kV, k.KVH, offset_kv);
  if (!k.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("trlhpc_sdpa_fwd")
                       .set_generate_stats(true)  // the lse the backward (and ring merges) need
                       .set_attn_scale(scale)
                       .set_causal_mask(true)     // top-left per sequence: i >= j inside a document run
                       .set_padding_mask(true)    // rows/keys past each sequence's length
                       .set_seq_len_q(seq_len_q)
                       .set_seq_len_kv(seq_len_kv)
                       .set_max_total_seq_len_q(k.total_tokens)
                       .set_max_total_seq_len_kv(k.total_tokens);
    if (k.window > 0) options.set_diagonal_band_left_bound(static_cast<int>(k.window));  // keeps i - j < window
    auto [o, stats] = g->sdpa(q, kk, v, options);
    o->set_output(true).set_uid(kO).set_dim(dims(k.NH)).set_stride(strides(k.NH)).set_ragged_offset(offset_q);
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim).set_stride(stats_stride);
  } else {
    auto o = io("O", kO, k.NH, offset_q), dout = io("dO", kDO, k.NH, offset_q);
    auto stats = g->tensor(Tensor_attributes().set_name("Stats").set_uid(kStats).set_dim(stats_dim).set_stride(stats_stride)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("trlhpc_sdpa_bwd")
                       .set_attn_scale(scale)
                       .set_causal_mask(true)
                       .set_padding_mask(true)
                       .set_seq_len_q(seq_len_q)
                       .set_seq_len_kv(seq_len_kv)
                       .set_max_total_seq_len_q(k.total_tokens)
                       .set_max_total_seq_len_kv(k.total_tokens)
                       // trlhpc's backward is bitwise reproducible (attention.cuh: no atomics); ask cuDNN for
                       // its ordered dQ accumulation, and fall back to the kernel where it has none.
                       .set_deterministic_algorithm(true);
    if (k.window > 0) options.set_diagonal_band_left_bound(static_cast<int>(k.window));
    auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, dout, stats, options);
    dq->set_output(true).set_uid(kDQ).set_dim(dims(k.NH)).set_stride(strides(k.NH)).set_ragged_offset(offset_q);
    dk->set_output(true).set_uid(kDK).set_dim(dims(k.KVH)).set_stride(strides(k.KVH)).set_ragged_offset(offset_kv);
    dv->set_output(true).set_uid(kDV).set_dim(dims(k.KVH)).set_stride(strides(k.KVH)).set_ragged_offset(offset_kv);
  }

  const std::pair<const char*, fe::error_t (*)(fe::graph::Graph&, cudnnHandle_t)> steps[] = {
      {"validate", [](fe::graph::Graph& gr, cudnnHandle_t) { return gr.validate(); }},
      {"build_operation_graph", [](fe::graph::Graph& gr, cudnnHandle_t h) { return gr.build_operation_graph(h); }},
      {"create_execution_plans",
       [](fe::graph::Graph& gr, cudnnHandle_t) { return gr.create_execution_plans({fe::HeurMode_t::A}); }},
      {"check_support", [](fe::graph::Graph& gr, cudnnHandle_t h) { return gr.check_support(h); }},
      {"build_plans", [](fe::graph::Graph& gr, cudnnHandle_t h) { return gr.build_plans(h); }},
  };
  for (const auto& [name, step] : steps) {
    fe::error_t e = step(*g, handle);
    if (!e.is_good()) {
      why = std::string(name) + ": " + e.get_message();
      return nullptr;
    }
  }
  return g;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

GraphKey key_for(bool backward, const kernels::PackedSequences& seq, const CudnnAttentionDims& d) {
  GraphKey k;
  k.backward = backward;
  TRLHPC_CHECK_CUDA(cudaGetDevice(&k.device));
  k.sequences = kernels::cudnn_graph_sequences(seq.count());
  k.max_length = kernels::cudnn_graph_max_length(seq.max_length, d.T);
  k.total_tokens = d.B * d.T;
  k.NH = d.NH;
  k.KVH = d.KVH;
  k.HS = d.HS;
  k.scale_bits = bits_of(d.scale);
  k.window = d.window;
  return k;
}

// The sequences' device tensors: cuDNN's seq_len / ragged offsets (int32, padded to the graph's sequence
// count with empty sequences at the end of the token axis) and the glue's token starts and lengths.
// Uploaded from pageable memory: cudaMemcpyAsync returns once the host data is staged, so the vectors
// may go when this constructor returns.
struct SequenceTensors {
  SequenceTensors(const kernels::PackedSequences& seq, const GraphKey& key, const CudnnAttentionDims& d,
                  DeviceAllocator& allocator, cudaStream_t stream) {
    const int64_t b = key.sequences, n = seq.count();
    const int64_t q_row = int64_t{d.NH} * d.HS, kv_row = int64_t{d.KVH} * d.HS;
    std::vector<int32_t> ints(static_cast<size_t>(b + 2 * (b + 1) + n), 0);
    int32_t* seq_len = ints.data();
    int32_t* off_q = seq_len + b;
    int32_t* off_kv = off_q + b + 1;
    int32_t* length = off_kv + b + 1;
    for (int64_t s = 0; s <= b; ++s) {
      const int64_t start = s < n ? seq.token_start[s] : key.total_tokens;
      if (s < b) seq_len[s] = s < n ? seq.length[s] : 0;
      off_q[s] = static_cast<int32_t>(start * q_row);  // caller checked total_tokens * row < 2^31
      off_kv[s] = static_cast<int32_t>(start * kv_row);
    }
    std::copy(seq.length.begin(), seq.length.end(), length);
    ints_ = DeviceBuffer<int32_t>(allocator, static_cast<int64_t>(ints.size()));
    starts_ = DeviceBuffer<int64_t>(allocator, n < 1 ? 1 : n);
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(ints_.get(), ints.data(), ints.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(starts_.get(), seq.token_start.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    seq_len_q = ints_.get();
    offset_q = seq_len_q + b;
    offset_kv = offset_q + b + 1;
    lengths = offset_kv + b + 1;
    token_start = starts_.get();
  }
  int32_t *seq_len_q = nullptr, *offset_q = nullptr, *offset_kv = nullptr, *lengths = nullptr;
  int64_t* token_start = nullptr;

 private:
  DeviceBuffer<int32_t> ints_;
  DeviceBuffer<int64_t> starts_;
};

bool offsets_fit_int32(const CudnnAttentionDims& d) {
  const int64_t heads = d.NH > d.KVH ? d.NH : d.KVH;
  return d.B * d.T * heads * d.HS < int64_t{INT32_MAX};
}

}  // namespace

struct CudnnAttention::Impl {
  explicit Impl(size_t capacity) : graphs(capacity) {
    cudnnHandle_t h = nullptr;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("cuDNN attention: cudnnCreate failed");
    handle.reset(h);
  }

  // The graph for `key` (built on first use), or nullptr if cuDNN declined it; a declined key is cached
  // too, so an unsupported shape costs one attempt, not one per call.
  fe::graph::Graph* graph(const GraphKey& key, float scale) {
    if (auto* found = graphs.find(key)) return found->get();
    std::string why;
    std::shared_ptr<fe::graph::Graph> g = build_graph(key, scale, handle.get(), why);
    if (!g)
      std::cerr << "trlhpc: cuDNN attention declined (" << describe(key) << "): " << why
                << "; these calls use the hand-written kernel\n";
    return graphs.insert(key, std::move(g)).get();
  }

  // What forward and backward share: the graph for the call's key, the sequences' tensors, the
  // workspace and the softmax-stats buffer (graph sequences x NH x max_length). nullopt: cuDNN cannot
  // take this call (offsets past int32, no sequence, a declined graph); the kernel runs instead.
  struct Call {
    GraphKey key;
    fe::graph::Graph* graph = nullptr;
    SequenceTensors sequences;
    DeviceBuffer<uint8_t> workspace;
    DeviceBuffer<float> stats;
  };
  std::optional<Call> prepare(bool backward, const kernels::PackedSequences& seq, const CudnnAttentionDims& d,
                              DeviceAllocator& allocator, cudaStream_t stream) {
    if (!offsets_fit_int32(d) || seq.count() == 0) return std::nullopt;
    const GraphKey key = key_for(backward, seq, d);
    fe::graph::Graph* g = graph(key, d.scale);
    if (!g) return std::nullopt;
    int64_t workspace_bytes = 0;
    check(g->get_workspace_size(workspace_bytes), "get_workspace_size");
    return Call{key, g, SequenceTensors(seq, key, d, allocator, stream),
                DeviceBuffer<uint8_t>(allocator, workspace_bytes < 1 ? 1 : workspace_bytes),
                DeviceBuffer<float>(allocator, key.sequences * d.NH * key.max_length)};
  }
  void execute(Call& call, std::unordered_map<int64_t, void*>& pack, cudaStream_t stream, const char* what) {
    if (cudnnSetStream(handle.get(), stream) != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("cuDNN attention: cudnnSetStream failed");
    check(call.graph->execute(handle.get(), pack, call.workspace.get()), what);
  }

  Handle handle;
  kernels::BoundedLru<GraphKey, std::shared_ptr<fe::graph::Graph>> graphs;
};

bool CudnnAttention::built() { return true; }

bool CudnnAttention::usable() {
  if (cudnnGetVersion() < 90000) return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  return major >= 8;
}

CudnnAttention::CudnnAttention(size_t graph_cache_capacity) : impl_(std::make_unique<Impl>(graph_cache_capacity)) {}
CudnnAttention::~CudnnAttention() = default;


template <class G>
bool CudnnAttention::forward(const bf16* q, const bf16* k, const bf16* v, G* o, float* lse,
                             const kernels::PackedSequences& seq, const CudnnAttentionDims& d,
                             DeviceAllocator& allocator, cudaStream_t stream) {
  std::optional<Impl::Call> call = impl_->prepare(false, seq, d, allocator, stream);
  if (!call) return false;
  const SequenceTensors& st = call->sequences;
  const int64_t o_numel = d.B * d.T * d.NH * d.HS;
  DeviceBuffer<bf16> o_bf16;
  bf16* o_out = nullptr;
  if constexpr (std::is_same_v<G, bf16>) {
    o_out = o;
  } else {
    o_bf16 = DeviceBuffer<bf16>(allocator, o_numel);
    o_out = o_bf16.get();
  }
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)}, {kK, const_cast<bf16*>(k)}, {kV, const_cast<bf16*>(v)},
      {kO, o_out},                {kStats, call->stats.get()}, {kSeqLenQ, st.seq_len_q},
      {kSeqLenKV, st.seq_len_q},  {kOffsetQ, st.offset_q},    {kOffsetKV, st.offset_kv}};
  impl_->execute(*call, pack, stream, "execute forward");
  cudnn_stats_to_lse(call->stats.get(), lse, st.token_start, st.lengths, seq.count(), d.NH, call->key.max_length, d.T,
                     stream);
  if constexpr (!std::is_same_v<G, bf16>) cudnn_store_output(o, o_out, o_numel, stream);
  return true;
}

template <class G>
bool CudnnAttention::backward(const bf16* q, const bf16* k, const bf16* v, const bf16* o, const float* lse,
                              const bf16* dout, G* dq, G* dk, G* dv, const kernels::PackedSequences& seq,
                              const CudnnAttentionDims& d, DeviceAllocator& allocator, cudaStream_t stream) {
  std::optional<Impl::Call> call = impl_->prepare(true, seq, d, allocator, stream);
  if (!call) return false;
  const SequenceTensors& st = call->sequences;
  const int64_t stats_numel = call->key.sequences * d.NH * call->key.max_length;
  // Padding slots are masked by cuDNN, but zero them so that nothing uninitialised is ever read.
  TRLHPC_CHECK_CUDA(cudaMemsetAsync(call->stats.get(), 0, stats_numel * sizeof(float), stream));
  cudnn_lse_to_stats(lse, call->stats.get(), st.token_start, st.lengths, seq.count(), d.NH, call->key.max_length, d.T,
                     stream);
  const int64_t q_numel = d.B * d.T * d.NH * d.HS, kv_numel = d.B * d.T * d.KVH * d.HS;
  // cuDNN overwrites; the contract accumulates: bf16 temporaries, then += in fp32.
  DeviceBuffer<bf16> dq_t(allocator, q_numel), dk_t(allocator, kv_numel), dv_t(allocator, kv_numel);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<bf16*>(q)},     {kK, const_cast<bf16*>(k)},        {kV, const_cast<bf16*>(v)},
      {kO, const_cast<bf16*>(o)},     {kDO, const_cast<bf16*>(dout)},    {kStats, call->stats.get()},
      {kDQ, dq_t.get()},              {kDK, dk_t.get()},                 {kDV, dv_t.get()},
      {kSeqLenQ, st.seq_len_q},       {kSeqLenKV, st.seq_len_q},         {kOffsetQ, st.offset_q},
      {kOffsetKV, st.offset_kv}};
  impl_->execute(*call, pack, stream, "execute backward");
  cudnn_accumulate_output(dq, dq_t.get(), q_numel, stream);
  cudnn_accumulate_output(dk, dk_t.get(), kv_numel, stream);
  cudnn_accumulate_output(dv, dv_t.get(), kv_numel, stream);
  return true;
}

#else  // built without cudnn-frontend: the dispatcher never routes here

struct CudnnAttention::Impl {};

bool CudnnAttention::built() { return false; }
bool CudnnAttention::usable() { return false; }
CudnnAttention::CudnnAttention(size_t) {}
CudnnAttention::~CudnnAttention() = default;

template <class G>
bool CudnnAttention::forward(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, G*, float*,
                             const kernels::PackedSequences&, const CudnnAttentionDims&, DeviceAllocator&,
                             cudaStream_t) {
  return false;
}

template <class G>
bool CudnnAttention::backward(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                              const float*, const __nv_bfloat16*, G*, G*, G*, const kernels::PackedSequences&,
                              const CudnnAttentionDims&, DeviceAllocator&, cudaStream_t) {
  return false;
}

#endif

template bool CudnnAttention::forward<float>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, float*,
                                             float*, const kernels::PackedSequences&, const CudnnAttentionDims&,
                                             DeviceAllocator&, cudaStream_t);
template bool CudnnAttention::forward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                     __nv_bfloat16*, float*, const kernels::PackedSequences&,
                                                     const CudnnAttentionDims&, DeviceAllocator&, cudaStream_t);
template bool CudnnAttention::backward<float>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                              const __nv_bfloat16*, const float*, const __nv_bfloat16*, float*, float*,
                                              float*, const kernels::PackedSequences&, const CudnnAttentionDims&,
                                              DeviceAllocator&, cudaStream_t);
template bool CudnnAttention::backward<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                      const __nv_bfloat16*, const float*, const __nv_bfloat16*,
                                                      __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                      const kernels::PackedSequences&, const CudnnAttentionDims&,
                                                      DeviceAllocator&, cudaStream_t);

}  // namespace trlhpc::cuda
