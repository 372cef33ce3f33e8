#pragma once
// CPU kernels (fp32, OpenBLAS + OpenMP). One op per file in kernels/cpu/, forward and backward together.
//
// Gradient convention (as in llm.c):
//   * parameter gradients ACCUMULATE (+=), so micro-batches and ring blocks add up;
//   * activation (input) gradients OVERWRITE (=), except attention_bwd which accumulates dq/dk/dv
//     because ring attention sums the contributions of every K/V block.
// Shape letters: include/trlhpc/model/shapes.hpp. All pointers are host memory, row-major.
#include <cstdint>
#include <string>

#include "trlhpc/kernels/token_loss.hpp"

namespace trlhpc::cpu {

// ---- matmul.cpp -----------------------------------------------------------------------------------
// c (M, N) = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T. a is (M, K) or (K, M) when trans_a;
// b is (K, N) or (N, K) when trans_b. beta = 0 ignores c's old contents (NaN-safe).
void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N, int64_t K,
            float alpha, float beta);
// Which GEMM matmul runs: "trlhpc AVX-512" (CPUs with AVX-512), "trlhpc AVX2" (AVX2 + FMA, no AVX-512)
// or "OpenBLAS" (older CPUs).
std::string cpu_gemm_name();
// The GEMM engines are chosen per process, not per Ops: kernels multiply inside other kernels (cross
// entropy, attention) without an Ops at hand. Unchosen: "auto", the fastest the CPU allows (cpuid).
// make_ops chooses from --cpu_gemm / --cpu_bf16_gemm before the first GEMM; tests and benchmarks from
// their command line. Each returns "" or what is wrong (option, value, what to use); a refused value
// changes nothing.
// choose_cpu_gemm: "auto" | "avx512" | "avx2" | "openblas" (matmul's engine).
std::string choose_cpu_gemm(const std::string& engine);
// The instructions a GEMM multiplies with, for the nominal peak (src/ops/nominal_peak.cpp): no FMA
// (SSE/AVX without FMA), AVX2 FMA, AVX-512 FMA, AVX512-BF16 dot products (VDPBF16PS), AMX-BF16 tiles.
enum class GemmIsa { NoFma, Avx2Fma, Avx512Fma, Avx512Bf16, AmxBf16 };
// Those of matmul as dispatched here (--cpu_gemm included); under OpenBLAS the CPU's widest FMA,
// which OpenBLAS's own CPU dispatch picks.
GemmIsa fp32_gemm_isa();

// ---- gemm_avx512.cpp ------------------------------------------------------------------------------
// trlhpc's own AVX-512 fp32 GEMM, which matmul uses when the CPU supports it.
// gemm_avx512_supported(): the CPU runs AVX-512 F/VL/DQ/BW and FMA (cpuid, not the build flags).
// gemm_avx512: the contract of matmul with K >= 1; call only when supported.
bool gemm_avx512_supported();
void gemm_avx512(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N, int64_t K,
                 float alpha, float beta);
// ---- gemm_avx2.cpp --------------------------------------------------------------------------------
// trlhpc's own AVX2/FMA fp32 GEMM, which matmul uses on CPUs with AVX2 but no AVX-512. Same contract,
// and the same bits as gemm_avx512 for the same operands. Call gemm_avx2 only when supported.
bool gemm_avx2_supported();
void gemm_avx2(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N, int64_t K,
               float alpha, float beta);
// ---- gemm_bf16.cpp --------------------------------------------------------------------------------
// The mixed-precision GEMM of --bf16: c (M, N) = alpha * bf16(op(a)) @ bf16(op(b)) + beta * c with fp32
// products and accumulation. Each operand is stored fp32 or bf16 (uint16_t bits); an fp32 operand is
// rounded to bf16 (nearest even) as it is packed, so callers pass fp32 master weights directly. c is
// fp32 or bf16 (rounded to nearest even once, after alpha/beta in fp32). beta = 0 ignores c.
struct GemmOperand {
  const void* data = nullptr;
  bool bf16 = false;
};
struct GemmResult {
  void* data = nullptr;
  bool bf16 = false;
};
// AMX tiles, AVX512-BF16 dot products, or the fp32 GEMM on bf16-rounded inputs (any CPU).
enum class Bf16GemmEngine { AMX, AVX512BF16, F32 };
// The engine matmul_bf16 uses: the fastest the CPU (cpuid) and kernel (AMX permission) allow;
// choose_bf16_gemm ("auto" | "amx" | "avx512bf16" | "f32", see choose_cpu_gemm) overrides.
// bf16_gemm_available(e): e can run here (tests skip engines that cannot).
Bf16GemmEngine bf16_gemm_engine();
std::string bf16_gemm_name();
std::string choose_bf16_gemm(const std::string& engine);
bool bf16_gemm_available(Bf16GemmEngine engine);
// The ISA of bf16_gemm_engine(): AMX-BF16, AVX512-BF16, or fp32_gemm_isa() for the f32 engine.
GemmIsa bf16_gemm_isa();
void matmul_bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                 int64_t M, int64_t N, int64_t K, float alpha, float beta);
// The same with an explicit engine, which must be available (tests and benchmarks).
void matmul_bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                 int64_t M, int64_t N, int64_t K, float alpha, float beta, Bf16GemmEngine engine);

// ---- cpu_model.cpp -------------------------------------------------------------------------------
// Who made the CPU and which family (CPUID leaves 0, 1 and 0x80000002-4): the FMA units per core, which
// CPUID does not report, follow from it (the nominal-peak table, src/ops/nominal_peak.cpp).
enum class CpuVendor { Intel, Amd, Other };
struct CpuModel {
  CpuVendor vendor = CpuVendor::Other;
  int family = 0;     // display family (base + extended): 6 Intel Core/Xeon, 0x19 AMD Zen 3/4, 0x1A Zen 5
  int model = 0;      // display model
  std::string brand;  // "Intel(R) Xeon(R) Platinum 8480+", "" when the CPU has no brand leaves
};
CpuModel cpu_model();

// y (N, C) += bias (C) broadcast over rows.
void bias_add(float* y, const float* bias, int64_t N, int64_t C);
// dbias (C) += sum over rows of dy (N, C).
void bias_bwd(const float* dy, float* dbias, int64_t N, int64_t C);

// ---- elementwise.cpp ------------------------------------------------------------------------------
void add_inplace(float* y, const float* x, int64_t n);               // y += x
void scale_inplace(float* y, float s, int64_t n);                     // y *= s
double sum_of_squares(const float* x, int64_t n);                     // sum x^2 in double
// dst = src rounded to bf16 (nearest even, math::bf16_bits_from_float) / widened back (exact).
void cast_f32_to_bf16(uint16_t* dst, const float* src, int64_t n);
void cast_bf16_to_f32(float* dst, const uint16_t* src, int64_t n);

// ---- embedding.cpp --------------------------------------------------------------------------------
// out (N, C) = table[ids[i] - vocab_start] for ids inside [vocab_start, vocab_start + V), zeros otherwise
// (the zeros make the vocab-parallel embedding a plain all-reduce under tensor parallel).
// table (V, C), ids (N).
void embedding_fwd(const int32_t* ids, const float* table, float* out, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start);
// dtable (V, C) += scatter of dout (N, C) by ids (rows outside the slice ignored). Deterministic:
// parallel over vocab rows/columns, never two threads on one row.
void embedding_bwd(const int32_t* ids, const float* dout, float* dtable, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start);

// ---- rmsnorm.cpp ----------------------------------------------------------------------------------
// y (N, C) = x * rstd * weight, rstd (N) = 1 / sqrt(mean(x^2) + eps); statistics in fp32/double.
void rmsnorm_fwd(const float* x, const float* weight, float* y, float* rstd, int64_t N, int64_t C, float eps);
// dx (N, C) = (overwrite); dweight (C) += (null: not computed). Uses the rstd saved by the forward.
void rmsnorm_bwd(const float* x, const float* weight, const float* rstd, const float* dy, float* dx,
                 float* dweight, int64_t N, int64_t C);
// --bf16 (uint16_t = bf16 bits): the residual stream (fp32) or a q/k projection (bf16) normalised into a
// bf16 GEMM input, and the q/k norms' backward from their bf16 input. Computed in fp32 registers: bit
// for bit the fp32 kernel on the widened input, with the bf16 output rounded once (kernels/cpu/element_io.hpp).
void rmsnorm_fwd(const float* x, const float* weight, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps);
void rmsnorm_fwd(const uint16_t* x, const float* weight, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps);
void rmsnorm_bwd(const uint16_t* x, const float* weight, const float* rstd, const float* dy, float* dx,
                 float* dweight, int64_t N, int64_t C);

// ---- rope.cpp -------------------------------------------------------------------------------------
// Rotary embedding, Hugging Face rotate-half convention, in place on x (N, H, HS):
//   for i < HS/2, angle = pos[n] * inv_freq[i]:
//   x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin   with x1 = x[..., i], x2 = x[..., i + HS/2].
// inv_freq (HS/2) already includes any rope_scaling. The angle is the fp32 product pos * inv_freq as in
// transformers; its cos/sin are evaluated in double and rounded to fp32.
void rope_fwd(float* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS);
// Backward = rotation by -angle, in place on dx (N, H, HS).
void rope_bwd(float* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS);
// The same in place on bf16 q/k (--bf16): fp32 arithmetic, one rounding per stored element.
void rope_fwd(uint16_t* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS);
void rope_bwd(uint16_t* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS);

// ---- attention.cpp, attention_bwd.cpp ----------------------------------------------------------------
// The single masked attention primitive (ARCHITECTURE.md "Attention is one primitive").
// q (B, Tq, NH, HS), k and v (B, Tk, KVH, HS); q_pos, q_doc (B, Tq); k_pos, k_doc (B, Tk).
// Query (b, i) may attend key (b, j) iff q_doc[b,i] == k_doc[b,j] && q_pos[b,i] >= k_pos[b,j], and,
// with a sliding window W > 0, q_pos[b,i] - k_pos[b,j] < W (transformers' sliding_window_causal:
// the query and the W - 1 keys before it). window 0 = no window; negative -> UserError.
// GQA: query head h uses kv head h / (NH / KVH).
// o (B, Tq, NH, HS) = softmax(cap(scale * q k^T) + mask) v; lse (B, NH, Tq) = log-sum-exp of the masked
// scaled (capped) scores (natural log). A query with no allowed key gets o = 0 and lse = -inf.
// softcap c > 0 (Gemma 2): cap(s) = c tanh(s / c), applied before the mask; 0 = none (s itself, the
// path without it untouched); negative or not finite -> UserError.
void attention_fwd(const float* q, const float* k, const float* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, float* o, float* lse, int64_t B, int64_t Tq,
                   int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window = 0,
                   float softcap = 0.0f);
// Backward from the (global) lse and o: with P = exp(cap(scale*qk) - lse) on allowed pairs and
// delta_i = sum_d do[i,d] * o[i,d]:  dS = P * (do v^T - delta) (times 1 - t^2, t = tanh(scale*qk / c),
// with a softcap),  dq += scale dS k, dk += scale dS^T q,
// dv += P^T do. dq (B,Tq,NH,HS), dk/dv (B,Tk,KVH,HS) ACCUMULATE so ring attention can sum K/V blocks.
void attention_bwd(const float* q, const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc,
                   const int32_t* k_doc, float* dq, float* dk, float* dv, int64_t B, int64_t Tq, int64_t Tk,
                   int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window = 0,
                   float softcap = 0.0f);
// --bf16: q, k, v (and in the backward o and dout) as bf16 bits, read where the kernel packs its tiles
// (no widened copy of the tensors); o written in bf16, or in fp32 (ring attention's block results);
// lse, dq, dk, dv fp32. Bit for bit the fp32 kernel on the widened inputs, o rounded once.
void attention_fwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, uint16_t* o, float* lse, int64_t B, int64_t Tq,
                   int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window = 0,
                   float softcap = 0.0f);
void attention_fwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, float* o, float* lse, int64_t B, int64_t Tq,
                   int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window = 0,
                   float softcap = 0.0f);
void attention_bwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o, const float* lse,
                   const uint16_t* dout, const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc,
                   const int32_t* k_doc, float* dq, float* dk, float* dv, int64_t B, int64_t Tq, int64_t Tk,
                   int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window = 0,
                   float softcap = 0.0f);
// Merge a block result into a running one (ring attention): lse' = logaddexp(lse_acc, lse_blk),
// o_acc' = o_acc * exp(lse_acc - lse') + o_blk * exp(lse_blk - lse'). o (B,T,NH,HS), lse (B,NH,T).
void attention_merge(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk, int64_t B, int64_t T,
                     int64_t NH, int64_t HS);

// The working memory attention_fwd / attention_bwd keep in the calling thread between calls (repacked
// K/V, the backward's per-head q/dout copies and its dS store, bounded at 64 MiB): what a call of this
// shape leaves held, each buffer being as large as the largest call so far. The memory plan counts it.
int64_t attention_scratch_bytes(int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, bool backward);
// The bytes the calling thread holds now (for tests of attention_scratch_bytes).
int64_t attention_scratch_held_bytes();

// ---- lora_dropout.cpp -----------------------------------------------------------------------------
// LoRA's input dropout, x and out (N, F) (may alias): element (n, f) is kept, scaled by 1 / (1 - p), when
// dropout_keeps(key, rows[n], columns[n], feature_offset + f, p) (core/philox.hpp), else 0. rows / columns
// (N) say where token n comes from (its dataset row and column), so the mask does not depend on how the
// tokens are laid out over ranks; feature_offset places a tp slice of the features.
void lora_dropout(const float* x, float* out, const int32_t* rows, const int32_t* columns, int64_t N, int64_t F,
                  int64_t feature_offset, float p, uint64_t key);

// ---- embedding_noise.cpp --------------------------------------------------------------------------
// NEFTune (model/neftune.hpp): x (N, C) += magnitude * neftune_unit_noise(key, rows[n], columns[n], c)
// (core/philox.hpp) for every token n with rows[n] >= 0 (padding, rows[n] = -1, is left alone). rows /
// columns (N) say where token n comes from, so the noise does not depend on the rank layout.
void embedding_noise(float* x, const int32_t* rows, const int32_t* columns, int64_t N, int64_t C, float magnitude,
                     uint64_t key);

// ---- swiglu.cpp -----------------------------------------------------------------------------------
// out (N, F) = silu(gate) * up, silu(x) = x / (1 + exp(-x)); gate, up (N, F).
void swiglu_fwd(const float* gate, const float* up, float* out, int64_t n);
// dgate, dup (N, F) overwrite.
void swiglu_bwd(const float* gate, const float* up, const float* dout, float* dgate, float* dup, int64_t n);
// The same on bf16 bit patterns (--bf16): fp32 math per element, each result rounded once.
void swiglu_fwd_bf16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n);
void swiglu_bwd_bf16(const uint16_t* gate, const uint16_t* up, const uint16_t* dout, uint16_t* dgate, uint16_t* dup,
                     int64_t n);

// ---- geglu.cpp ------------------------------------------------------------------------------------
// Gemma's MLP core: out (N, F) = gelu_tanh(gate) * up (math::geglu_tanh); dgate, dup overwrite.
void geglu_tanh_fwd(const float* gate, const float* up, float* out, int64_t n);
void geglu_tanh_bwd(const float* gate, const float* up, const float* dout, float* dgate, float* dup, int64_t n);
// The same on bf16 bit patterns (--bf16): fp32 math per element, each result rounded once.
void geglu_tanh_fwd_bf16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n);
void geglu_tanh_bwd_bf16(const uint16_t* gate, const uint16_t* up, const uint16_t* dout, uint16_t* dgate,
                         uint16_t* dup, int64_t n);

// ---- cross_entropy.cpp ----------------------------------------------------------------------------
// Fused LM head + cross-entropy that never holds more than chunk_tokens x V logits.
// hidden (N, C), weight (V, C) (the LM head, or the tied embedding), targets (N) with -100 = ignore.
// logits = hidden @ weight^T; per valid token t: loss_t = logsumexp(logits_t) - logits_t[target_t].
// Returns the SUM of loss_t over valid tokens (double). When dhidden != nullptr also does the backward
// for the loss  grad_scale * sum_t loss_t:  dlogits = grad_scale * (softmax - onehot) on valid rows,
// dhidden (N, C) = dlogits @ weight (overwrite), dweight (V, C) += dlogits^T @ hidden.
// *valid_tokens (optional) receives the count of targets != -100.
// *metrics (optional) receives TRL's per-token metrics summed over valid tokens: the entropy of
// softmax(logits_t) in nats, and how many targets are the first index of the row's maximum logit
// (torch.argmax's tie rule: TRL's is_top1).
// bf16_gemm: the three GEMMs (logits, dhidden, dweight) are matmul_bf16 (hidden, weight and dlogits
// rounded to bf16, fp32 accumulation; --bf16); the softmax, loss and dlogits stay fp32.
// logit_softcap c > 0 (Gemma 2's final_logit_softcapping): z is replaced by c tanh(z / c) (softcap.hpp,
// fp32) before the softmax, so the loss and the metrics are those of the capped logits (TRL sees the
// capped outputs.logits) and dz is taken back through the cap (times 1 - tanh(z / c)^2). 0 = none.
// token_loss: label smoothing and/or DFT (token_loss.hpp) replace loss_t and its dlogits; the metrics
// stay those of the softmax. Plain (the default): the path above, bit for bit.
struct CrossEntropyMetrics {
  double entropy_sum = 0;
  int64_t top1 = 0;
};
double cross_entropy_fwd_bwd(const float* hidden, const float* weight, const int32_t* targets, int64_t N,
                             int64_t C, int64_t V, float grad_scale, float* dhidden, float* dweight,
                             int64_t chunk_tokens, int64_t* valid_tokens, CrossEntropyMetrics* metrics = nullptr,
                             bool bf16_gemm = false, float logit_softcap = 0.0f, const TokenLoss& token_loss = {});
// The same with the weight as a GEMM operand: bf16 (a compute copy, --bf16; needs bf16_gemm) or fp32.
double cross_entropy_fwd_bwd(const float* hidden, const GemmOperand& weight, const int32_t* targets, int64_t N,
                             int64_t C, int64_t V, float grad_scale, float* dhidden, float* dweight,
                             int64_t chunk_tokens, int64_t* valid_tokens, CrossEntropyMetrics* metrics, bool bf16_gemm,
                             float logit_softcap, const TokenLoss& token_loss = {});
// x (n) = cap * tanh(x / cap) in place (the decoder's returned logits, and the vocab-parallel loss's local
// logits before its statistics); cap > 0.
void logit_softcap(float* x, int64_t n, float cap);

// ---- vocab_parallel_cross_entropy.cpp ------------------------------------------------------------
// The pieces of a vocabulary-split cross-entropy over a chunk of local logits (M, V) for vocabulary
// ids [vocab_start, vocab_start + V), with all-reduces between them done by the caller (see the file
// header). targets (M), -100 = ignore; row_max (M); sums (M, 2) = (sum exp(z - max), z[target] or 0).
void vocab_parallel_ce_max(const float* logits, int64_t M, int64_t V, float* row_max);
void vocab_parallel_ce_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, float* sums);
// TRL's metrics on a vocabulary slice, after the max is all-reduced: stats (M, 2) = (sum exp(z - max) *
// (z - max), the first global vocabulary id whose logit equals max, or vocab_size if none here). The
// caller all-reduces column 0 by sum and column 1 by min; zeros for ignored targets.
void vocab_parallel_ce_metrics(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                               int64_t vocab_size, const float* row_max, float* stats);
// logits (M, V) overwritten with dlogits = grad_scale * (softmax - onehot) (zero rows for ignored targets).
// logit_softcap c > 0: the logits were capped in place (logit_softcap); dlogits are multiplied by
// 1 - (z / c)^2, taking them back to the head's output.
void vocab_parallel_ce_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, const float* sums, float grad_scale, float logit_softcap = 0.0f);
// Label smoothing's piece: logit_sums (M) = sum_v z[v] of the slice (0 for ignored rows); the caller
// all-reduces it by sum and passes sum / vocab_size as z_mean to token_loss_from_statistics.
void vocab_parallel_ce_logit_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V,
                                  float* logit_sums);
// vocab_parallel_ce_grad for a TokenLoss other than plain (label smoothing and/or DFT, token_loss.hpp):
// dlogits = grad_scale * w * (softmax - (1 - eps) onehot - eps / vocab_size), w = p_y (DFT, from the
// all-reduced sums) or 1; vocab_size is the whole vocabulary (>= V). The softcap as above.
void vocab_parallel_ce_shaped_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                                   int64_t vocab_size, const float* row_max, const float* sums, float grad_scale,
                                   float logit_softcap, const TokenLoss& token_loss);

// ---- adamw.cpp ------------------------------------------------------------------------------------
// Decoupled AdamW, PyTorch semantics (torch.optim.AdamW, foreach=False), step >= 1:
//   p -= lr * weight_decay * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
// compute (optional): receives bf16(p) of the updated p in the same pass, the bits cast_f32_to_bf16
// would write (the --bf16 compute copy, without a second read of the parameters).
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step, uint16_t* compute = nullptr);

}  // namespace trlhpc::cpu
