#pragma once
// Which implementation runs a CUDA attention call: cuDNN's fused SDPA (kernels/cuda/cudnn_attention.hpp)
// or the hand-written flash kernel (kernels/cuda/attention.cuh), the general one. Host C++ only, so the
// choice is unit-tested without a GPU (tests/unit/test_attention_route.cpp); CudaOpsImpl applies it
// (src/ops/cuda_ops_attention_route.cu).
//
// Two stages:
//   1. choose_attention(preference, facts): everything known without reading the batch (dtype, head
//      size, window, output dtype, which tensors define the mask, whether cuDNN was built and loads).
//   2. packed_sequences(pos, doc, B, T): the mask cuDNN can express. trlhpc's mask is "same document and
//      pos_q >= pos_k (and pos_q - pos_k < W)" on arbitrary position/document ids; cuDNN's SDPA knows a
//      causal mask on token indices, a sliding window on indices and padding by sequence lengths, plus
//      ragged offsets that lay variable-length sequences out back to back. A packed row is therefore
//      expressible iff it cuts into runs of one document each, the runs' documents all differ within the
//      row (a document split in two would see itself across the cut), and positions step by exactly 1
//      inside a run (then pos_q - pos_k = i - j, so cuDNN's index masks are trlhpc's position masks).
//      Each run becomes one cuDNN sequence. Anything else goes to the hand-written kernel.
//
// `--cuda_attention auto|cudnn|kernel` (docs/CONTRACT.md; CudaOpsOptions::attention). `auto` is the hand-written kernel until a
// GPU run has measured cuDNN faster on the benchmark shape (issue 25: "chosen by measurement"); then
// kCudnnMeasuredFaster flips and `auto` routes eligible calls to cuDNN. `cudnn` routes every eligible call
// there (ineligible ones still take the kernel: there is no other implementation of them); `kernel` never
// uses cuDNN.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace trlhpc::kernels {

// Flip once a GPU run has measured cuDNN's attention faster than the hand-written kernel (fwd + bwd on
// gpu_bench's packed row); until then `auto` means the kernel. Nothing has been measured yet.
inline constexpr bool kCudnnAttentionMeasuredFaster = false;

enum class AttentionPreference { Auto, Cudnn, Kernel };

// The value of --cuda_attention; empty = auto. Anything else is a configuration error, not a silent
// default.
inline AttentionPreference parse_attention_preference(const std::string& v) {
  if (v.empty() || v == "auto") return AttentionPreference::Auto;
  if (v == "cudnn") return AttentionPreference::Cudnn;
  if (v == "kernel") return AttentionPreference::Kernel;
  throw std::invalid_argument("--cuda_attention " + v + ": expected auto, cudnn or kernel");
}

// What the dispatcher knows about one call before it reads the position/document ids.
struct AttentionCallFacts {
  bool bf16_inputs = false;       // q, k, v (and dout) are BF16; cuDNN's flash SDPA has no fp32 path
  bool same_mask_ids = false;     // q_pos is k_pos and q_doc is k_doc (same storage), Tq == Tk: self-
                                  // attention, so every query sees at least itself (no all-masked row
                                  // whose o = 0, lse = -inf cuDNN would not reproduce). Ring attention's
                                  // off-diagonal blocks are not, and stay on the kernel.
  int64_t head_size = 0;
  int64_t window = 0;             // AttentionShape::window; 0 = none
  bool softcap = false;           // AttentionShape::softcap set (Gemma 2): not expressed for cuDNN yet
  bool cudnn_built = false;       // compiled with cudnn-frontend (TRLHPC_HAVE_CUDNN_FRONTEND)
  bool cudnn_usable = false;      // cuDNN >= 9 loads and the device is sm_80 or newer
};

struct AttentionRoute {
  bool cudnn = false;
  std::string reason;  // why not cuDNN (empty when cuDNN)
};

// cuDNN's fused flash SDPA: head sizes up to 256 in multiples of 8 (bf16).
inline bool cudnn_attention_head_size_ok(int64_t hs) { return hs > 0 && hs <= 256 && hs % 8 == 0; }

inline AttentionRoute choose_attention(AttentionPreference preference, const AttentionCallFacts& f,
                                       bool measured_faster = kCudnnAttentionMeasuredFaster) {
  if (preference == AttentionPreference::Kernel) return {false, "--cuda_attention kernel"};
  if (preference == AttentionPreference::Auto && !measured_faster)
    return {false, "auto: cuDNN not yet measured faster on a GPU"};
  if (!f.cudnn_built) return {false, "built without cudnn-frontend"};
  if (!f.cudnn_usable) return {false, "cuDNN >= 9 on sm_80+ not available at run time"};
  if (!f.bf16_inputs) return {false, "fp32 inputs (cuDNN's fused SDPA is bf16/fp16 only)"};
  if (!f.same_mask_ids) return {false, "q and k mask ids differ (ring attention block)"};
  if (!cudnn_attention_head_size_ok(f.head_size)) return {false, "head size not a multiple of 8 up to 256"};
  if (f.window < 0) return {false, "negative window"};
  if (f.softcap) return {false, "logit soft-capping"};
  return {true, ""};
}

// The documents of B packed rows of T tokens as cuDNN sequences (stage 2). Sequence s covers the tokens
// [token_start[s], token_start[s] + length[s]) of the flattened (B*T) token axis; sequences never cross
// rows. Ordered by row, then by position in the row; every token is in exactly one sequence.
struct PackedSequences {
  std::vector<int64_t> token_start;
  std::vector<int32_t> length;
  int32_t max_length = 0;
  int64_t count() const { return static_cast<int64_t>(length.size()); }
};

// The runs of pos/doc (B, T) row-major, or nullopt when trlhpc's mask on these ids is not the union of
// per-run causal masks (see the header comment).
inline std::optional<PackedSequences> packed_sequences(const int32_t* pos, const int32_t* doc, int64_t B,
                                                       int64_t T) {
  PackedSequences out;
  std::vector<int32_t> docs_in_row;
  for (int64_t b = 0; b < B; ++b) {
    docs_in_row.clear();
    const int32_t* p = pos + b * T;
    const int32_t* d = doc + b * T;
    int64_t start = 0;
    for (int64_t t = 1; t <= T; ++t) {
      const bool cut = t == T || d[t] != d[t - 1];
      if (!cut) {
        if (p[t] != p[t - 1] + 1) return std::nullopt;  // positions must step by 1 inside a run
        continue;
      }
      for (int32_t seen : docs_in_row)
        if (seen == d[start]) return std::nullopt;  // the same document in two runs of one row
      docs_in_row.push_back(d[start]);
      const int64_t len = t - start;
      if (len > INT32_MAX) return std::nullopt;
      out.token_start.push_back(b * T + start);
      out.length.push_back(static_cast<int32_t>(len));
      if (len > out.max_length) out.max_length = static_cast<int32_t>(len);
      start = t;
    }
  }
  return out;
}

// The graph dimensions a layout runs under: the sequence count and the longest sequence rounded up to
// powers of two (the longest capped at T), so that batches of different documents reuse a few cached
// cuDNN graphs instead of building one (heuristics, plan compilation) per batch. The padding sequences
// have length 0; rows past a sequence's length are masked by cuDNN's padding mask.
inline int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}
inline int64_t cudnn_graph_sequences(int64_t count) { return next_power_of_two(count < 1 ? 1 : count); }
inline int64_t cudnn_graph_max_length(int64_t max_length, int64_t T) {
  const int64_t p = next_power_of_two(max_length < 1 ? 1 : max_length);
  return p < T ? p : T;
}

}  // namespace trlhpc::kernels
