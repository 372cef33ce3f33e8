// The CPU backend under a BF16 compute dtype (--bf16): every op that takes BF16 activations, against
// the fp32 kernel.
//
// 1. Exactness of the plumbing. The BF16 path widens its bf16 inputs exactly, runs the fp32 kernel and
//    rounds each BF16 output once (round to nearest even). So with the same bf16-representable inputs
//    in F32 tensors, the fp32 backend's outputs rounded to bf16 must equal the BF16 path's outputs bit
//    for bit, and its F32 outputs (statistics, lse, weight gradients) must be identical.
// 2. The stated bf16 bound against the fp32 kernel on the unrounded inputs (the standard's "fp32
//    kernel" comparison). Storing an input in bf16 moves it by at most 2^-9 relative, and the output
//    store adds 2^-9; the ops here are smooth with gains of order 1 on these inputs (|x| <= 1, scale
//    1/sqrt(HS) in attention), so the normalised error ||bf16 - fp32|| / ||fp32|| stays below a few
//    ulps: bound 4 * 2^-8 = 1.6e-2. A missing rounding would pass it, which is why (1) exists; a
//    wrong one (truncation of the bits, a wrong element) fails both.
// 3. The GEMM routing: with a BF16 compute dtype even F32 x F32 products are the mixed-precision GEMM.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/dtype.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {

using testing::normalized_error;
using testing::random_floats;

constexpr double kBf16Bound = 4.0 / 256.0;  // (2) above

float rounded(float x) { return bf16_to_f32(f32_to_bf16(x)); }

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = rounded(x);
  return v;
}

Tensor put(Ops& ops, const std::vector<float>& v, const Shape& shape, DType dtype) {
  Tensor t = ops.allocate(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  if (dtype == DType::F32) {
    ops.copy_from_host(t, v.data(), v.size() * sizeof(float));
  } else {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
    ops.copy_from_host(t, bits.data(), bits.size() * sizeof(uint16_t));
  }
  return t;
}

std::vector<float> get(Ops& ops, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32) {
    ops.copy_to_host(v.data(), t, v.size() * sizeof(float));
  } else {
    std::vector<uint16_t> bits(v.size());
    ops.copy_to_host(bits.data(), t, bits.size() * sizeof(uint16_t));
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(bits[i]);
  }
  return v;
}

Tensor put_ids(Ops& ops, const std::vector<int32_t>& v) {
  Tensor t = ops.allocate({static_cast<int64_t>(v.size())}, DType::I32);
  ops.copy_from_host(t, v.data(), v.size() * sizeof(int32_t));
  return t;
}

// The three runs every op test makes: the BF16 backend on bf16 tensors of x, the fp32 backend on F32
// tensors of round(x), and the fp32 backend on x itself.
struct Runs {
  std::unique_ptr<Ops> bf16 = make_cpu_ops(DType::BF16), f32 = make_cpu_ops(DType::F32);
};

// Checks (1) and (2) for one output: `mixed` from the BF16 path, `exact` from fp32 on rounded inputs,
// `reference` from fp32 on the originals; `stored_bf16`: the BF16 path stored this output in bf16.
void expect_output(const char* what, const std::vector<float>& mixed, const std::vector<float>& exact,
                   const std::vector<float>& reference, bool stored_bf16) {
  ASSERT_EQ(mixed.size(), exact.size()) << what;
  size_t mismatches = 0;
  for (size_t i = 0; i < mixed.size(); ++i) {
    const float want = stored_bf16 ? rounded(exact[i]) : exact[i];
    if (std::memcmp(&mixed[i], &want, sizeof(float)) != 0 && !(std::isnan(mixed[i]) && std::isnan(want))) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u) << what << ": the bf16 path is not the fp32 kernel on bf16 inputs with one rounding";
  const double err = normalized_error(mixed, reference);
  EXPECT_LE(err, kBf16Bound) << what << ": bf16 vs fp32 kernel";
  std::printf("[ measured ] %-22s normalised error vs fp32 %.2e (bound %.2e)\n", what, err, kBf16Bound);
}

TEST(CpuOpsBf16, CastRoundsToNearestEvenAndWidensExactly) {
  Runs r;
  const std::vector<float> x = {1.0f, 1.00390625f, 1.01171875f, -3.3e38f, 1e-40f, std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(), 0.1f};
  const Tensor src = put(*r.bf16, x, {8}, DType::F32), half = r.bf16->allocate({8}, DType::BF16),
               back = r.bf16->allocate({8}, DType::F32);
  r.bf16->cast(half, src);
  r.bf16->cast(back, half);
  const std::vector<float> got = get(*r.bf16, back);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f);            // halfway between 1 and 1 + 2^-7: to the even one
  EXPECT_EQ(got[2], 1.015625f);       // halfway between 1.0078125 and 1.015625: to the even one
  EXPECT_TRUE(std::isinf(got[5]));
  EXPECT_TRUE(std::isnan(got[6]));
  EXPECT_EQ(got[7], rounded(0.1f));
  EXPECT_NE(got[7], 0.1f);
}

TEST(CpuOpsBf16, RmsNormForwardStoresOneRoundingOfTheFp32Kernel) {
  Runs r;
  const int64_t N = 37, C = 96;
  const std::vector<float> x = random_floats(N * C, 1), w = random_floats(C, 2);
  // x is the F32 residual stream in both runs; y is the bf16 GEMM input.
  const Tensor y16 = r.bf16->allocate({N, C}, DType::BF16), rstd16 = r.bf16->allocate({N});
  r.bf16->rmsnorm_fwd(put(*r.bf16, x, {N, C}, DType::F32), put(*r.bf16, w, {C}, DType::F32), y16, rstd16, 1e-6f);
  const Tensor y32 = r.f32->allocate({N, C}), rstd32 = r.f32->allocate({N});
  r.f32->rmsnorm_fwd(put(*r.f32, x, {N, C}, DType::F32), put(*r.f32, w, {C}, DType::F32), y32, rstd32, 1e-6f);
  expect_output("rmsnorm y", get(*r.bf16, y16), get(*r.f32, y32), get(*r.f32, y32), true);
  expect_output("rmsnorm rstd", get(*r.bf16, rstd16), get(*r.f32, rstd32), get(*r.f32, rstd32), false);
}

// The q/k norms under --bf16 (Qwen3, Gemma 3): a bf16 projection normalised into bf16 with the bf16-rounded
// weight, and the backward from that bf16 input into fp32 gradients; also the residual stream (fp32)
// normalised with a bf16 weight, as input_layernorm is. Each read and written in place by the bf16
// kernels (kernels/cpu/element_io.hpp): bit for bit the fp32 kernel on the rounded values.
TEST(CpuOpsBf16, RmsNormOnBf16InputsAndWeights) {
  Runs r;
  const int64_t N = 53, C = 80;
  const std::vector<float> x = random_floats(N * C, 31), w = random_floats(C, 32), dy = random_floats(N * C, 33);
  for (const DType x_dtype : {DType::BF16, DType::F32}) {
    const char* what = x_dtype == DType::BF16 ? "q/k norm" : "layer norm";
    // mixed: the BF16 backend, weight in bf16; exact: fp32 on round(x) (bf16 input only) and round(w).
    const std::vector<float> x_exact = x_dtype == DType::BF16 ? rounded(x) : x;
    const Tensor x16 = put(*r.bf16, x, {N, C}, x_dtype), w16 = put(*r.bf16, w, {C}, DType::BF16);
    const Tensor y16 = r.bf16->allocate({N, C}, DType::BF16), rstd16 = r.bf16->allocate({N});
    r.bf16->rmsnorm_fwd(x16, w16, y16, rstd16, 1e-6f);
    const Tensor x32 = put(*r.f32, x_exact, {N, C}, DType::F32), w32 = put(*r.f32, rounded(w), {C}, DType::F32);
    const Tensor y32 = r.f32->allocate({N, C}), rstd32 = r.f32->allocate({N});
    r.f32->rmsnorm_fwd(x32, w32, y32, rstd32, 1e-6f);
    const Tensor xf = put(*r.f32, x, {N, C}, DType::F32), wf = put(*r.f32, w, {C}, DType::F32);
    const Tensor yf = r.f32->allocate({N, C}), rstdf = r.f32->allocate({N});
    r.f32->rmsnorm_fwd(xf, wf, yf, rstdf, 1e-6f);
    expect_output((std::string(what) + " y").c_str(), get(*r.bf16, y16), get(*r.f32, y32), get(*r.f32, yf), true);
    // Backward: dy and dx fp32 (the decoder's dq / dq_pre), dweight accumulated in fp32.
    const Tensor dy16 = put(*r.bf16, dy, {N, C}, DType::F32), dx16 = r.bf16->allocate({N, C}), dw16 = r.bf16->zeros({C});
    r.bf16->rmsnorm_bwd(x16, w16, rstd16, dy16, dx16, dw16);
    const Tensor dy32 = put(*r.f32, dy, {N, C}, DType::F32), dx32 = r.f32->allocate({N, C}), dw32 = r.f32->zeros({C});
    r.f32->rmsnorm_bwd(x32, w32, rstd32, dy32, dx32, dw32);
    const Tensor dxf = r.f32->allocate({N, C}), dwf = r.f32->zeros({C});
    r.f32->rmsnorm_bwd(xf, wf, rstdf, dy32, dxf, dwf);
    expect_output((std::string(what) + " dx").c_str(), get(*r.bf16, dx16), get(*r.f32, dx32), get(*r.f32, dxf), false);
    expect_output((std::string(what) + " dweight").c_str(), get(*r.bf16, dw16), get(*r.f32, dw32), get(*r.f32, dwf),
                  false);
  }
}

TEST(CpuOpsBf16, RopeRotatesBf16InPlace) {
  Runs r;
  const int64_t N = 21, H = 3, HS = 16;
  const std::vector<float> x = random_floats(N * H * HS, 3), inv = random_floats(HS / 2, 4, 0.5f);
  std::vector<int32_t> pos(N);
  for (int64_t i = 0; i < N; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i * 7 % 50);
  for (bool backward : {false, true}) {
    const Tensor x16 = put(*r.bf16, x, {N, H, HS}, DType::BF16), xr = put(*r.f32, rounded(x), {N, H, HS}, DType::F32),
                 x32 = put(*r.f32, x, {N, H, HS}, DType::F32);
    const Tensor p16 = put_ids(*r.bf16, pos), p32 = put_ids(*r.f32, pos);
    const Tensor f16 = put(*r.bf16, inv, {HS / 2}, DType::F32), f32 = put(*r.f32, inv, {HS / 2}, DType::F32);
    if (backward) {
      r.bf16->rope_bwd(x16, p16, f16);
      r.f32->rope_bwd(xr, p32, f32);
      r.f32->rope_bwd(x32, p32, f32);
    } else {
      r.bf16->rope_fwd(x16, p16, f16);
      r.f32->rope_fwd(xr, p32, f32);
      r.f32->rope_fwd(x32, p32, f32);
    }
    expect_output(backward ? "rope backward" : "rope forward", get(*r.bf16, x16), get(*r.f32, xr), get(*r.f32, x32), true);
  }
}

TEST(CpuOpsBf16, SwigluForwardAndBackward) {
  Runs r;
  const int64_t n = 4099;  // not a multiple of any vector width
  const std::vector<float> g = random_floats(n, 5, 3.0f), u = random_floats(n, 6), d = random_floats(n, 7);
  auto run = [&](Ops& ops, const std::vector<float>& gv, const std::vector<float>& uv, const std::vector<float>& dv,
                 DType dt) {
    const Tensor gt = put(ops, gv, {n}, dt), ut = put(ops, uv, {n}, dt), dt_ = put(ops, dv, {n}, dt);
    const Tensor out = ops.allocate({n}, dt), dg = ops.allocate({n}, dt), du = ops.allocate({n}, dt);
    ops.swiglu_fwd(gt, ut, out);
    ops.swiglu_bwd(gt, ut, dt_, dg, du);
    return std::vector<std::vector<float>>{get(ops, out), get(ops, dg), get(ops, du)};
  };
  const auto m = run(*r.bf16, g, u, d, DType::BF16);
  const auto e = run(*r.f32, rounded(g), rounded(u), rounded(d), DType::F32);
  const auto f = run(*r.f32, g, u, d, DType::F32);
  const char* names[] = {"swiglu out", "swiglu dgate", "swiglu dup"};
  for (int i = 0; i < 3; ++i) expect_output(names[i], m[static_cast<size_t>(i)], e[static_cast<size_t>(i)], f[static_cast<size_t>(i)], true);
}

// Gemma's GeGLU (tanh GELU) under --bf16: one rounding of the fp32 kernel on the bf16 inputs.
TEST(CpuOpsBf16, GegluTanhForwardAndBackward) {
  Runs r;
  const int64_t n = 4099;
  const std::vector<float> g = random_floats(n, 15, 3.0f), u = random_floats(n, 16), d = random_floats(n, 17);
  auto run = [&](Ops& ops, const std::vector<float>& gv, const std::vector<float>& uv, const std::vector<float>& dv,
                 DType dt) {
    const Tensor gt = put(ops, gv, {n}, dt), ut = put(ops, uv, {n}, dt), dt_ = put(ops, dv, {n}, dt);
    const Tensor out = ops.allocate({n}, dt), dg = ops.allocate({n}, dt), du = ops.allocate({n}, dt);
    ops.geglu_tanh_fwd(gt, ut, out);
    ops.geglu_tanh_bwd(gt, ut, dt_, dg, du);
    return std::vector<std::vector<float>>{get(ops, out), get(ops, dg), get(ops, du)};
  };
  const auto m = run(*r.bf16, g, u, d, DType::BF16);
  const auto e = run(*r.f32, rounded(g), rounded(u), rounded(d), DType::F32);
  const auto f = run(*r.f32, g, u, d, DType::F32);
  const char* names[] = {"geglu out", "geglu dgate", "geglu dup"};
  for (int i = 0; i < 3; ++i) expect_output(names[i], m[static_cast<size_t>(i)], e[static_cast<size_t>(i)], f[static_cast<size_t>(i)], true);
}

TEST(CpuOpsBf16, AttentionForwardBackwardOnPackedRows) {
  Runs r;
  const int64_t B = 2, T = 24, NH = 4, KVH = 2, HS = 16;
  const Batch batch = testing::random_packed_batch(B, T, 8);  // two documents per row: the doc mask matters
  const std::vector<float> q = random_floats(B * T * NH * HS, 9), k = random_floats(B * T * KVH * HS, 10),
                           v = random_floats(B * T * KVH * HS, 11), dout = random_floats(B * T * NH * HS, 12);
  AttentionShape s{B, T, T, NH, KVH, HS, 0.25f};
  struct Out {
    std::vector<float> o, lse, dq, dk, dv;
  };
  auto run = [&](Ops& ops, bool round_inputs, DType dt) {
    auto in = [&](const std::vector<float>& x, const Shape& sh) { return put(ops, round_inputs ? rounded(x) : x, sh, dt); };
    const Tensor qt = in(q, {B, T, NH, HS}), kt = in(k, {B, T, KVH, HS}), vt = in(v, {B, T, KVH, HS}),
                 dot = in(dout, {B, T, NH, HS});
    const Tensor pos = put_ids(ops, batch.positions), doc = put_ids(ops, batch.doc_ids);
    const Tensor o = ops.allocate({B, T, NH, HS}, dt), lse = ops.allocate({B, NH, T});
    ops.attention_fwd(qt, kt, vt, pos, pos, doc, doc, o, lse, s);
    // dq, dk, dv are F32 in the decoder under --bf16 (attention_bwd accumulates into them).
    const Tensor dq = ops.zeros({B, T, NH, HS}), dk = ops.zeros({B, T, KVH, HS}), dv = ops.zeros({B, T, KVH, HS});
    ops.attention_bwd(qt, kt, vt, o, lse, dot, pos, pos, doc, doc, dq, dk, dv, s);
    return Out{get(ops, o), get(ops, lse), get(ops, dq), get(ops, dk), get(ops, dv)};
  };
  const Out m = run(*r.bf16, false, DType::BF16), e = run(*r.f32, true, DType::F32), f = run(*r.f32, false, DType::F32);
  expect_output("attention o", m.o, e.o, f.o, true);
  expect_output("attention lse", m.lse, e.lse, f.lse, false);
  // The backward reads the bf16-stored o, so the exact twin is fp32 on round(o): recompute it so.
  const std::unique_ptr<Ops> f32 = make_cpu_ops(DType::F32);
  {
    const Tensor qt = put(*f32, rounded(q), {B, T, NH, HS}, DType::F32), kt = put(*f32, rounded(k), {B, T, KVH, HS}, DType::F32),
                 vt = put(*f32, rounded(v), {B, T, KVH, HS}, DType::F32), dot = put(*f32, rounded(dout), {B, T, NH, HS}, DType::F32);
    const Tensor pos = put_ids(*f32, batch.positions), doc = put_ids(*f32, batch.doc_ids);
    const Tensor o = put(*f32, rounded(e.o), {B, T, NH, HS}, DType::F32), lse = put(*f32, e.lse, {B, NH, T}, DType::F32);
    const Tensor dq = f32->zeros({B, T, NH, HS}), dk = f32->zeros({B, T, KVH, HS}), dv = f32->zeros({B, T, KVH, HS});
    f32->attention_bwd(qt, kt, vt, o, lse, dot, pos, pos, doc, doc, dq, dk, dv, s);
    expect_output("attention dq", m.dq, get(*f32, dq), f.dq, false);
    expect_output("attention dk", m.dk, get(*f32, dk), f.dk, false);
    expect_output("attention dv", m.dv, get(*f32, dv), f.dv, false);
  }
}

// Rows longer than one 64-token tile (several query and key tiles: skipped, full and partial pairs), a
// sliding window, GQA, and the forward into an fp32 o (ring attention's block results): bf16 q/k/v read
// in place where the kernel packs them, bit for bit the fp32 kernel on the rounded inputs.
// softcap > 0: Gemma 2's capped scores (AttentionShape::softcap), the same exactness under bf16.
void expect_windowed_attention(float softcap) {
  Runs r;
  const int64_t B = 2, T = 150, NH = 4, KVH = 1, HS = 8;
  // Row 0: one document of 150 tokens; row 1: documents of 100 and 50 (the window and the tiles matter).
  Batch batch;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const bool second = b == 1 && t >= 100;
      batch.positions.push_back(static_cast<int32_t>(second ? t - 100 : t));
      batch.doc_ids.push_back(second ? 1 : 0);
    }
  const std::vector<float> q = random_floats(B * T * NH * HS, 41), k = random_floats(B * T * KVH * HS, 42),
                           v = random_floats(B * T * KVH * HS, 43), dout = random_floats(B * T * NH * HS, 44);
  AttentionShape s{B, T, T, NH, KVH, HS, 0.35f};
  s.window = 40;
  s.softcap = softcap;
  auto forward = [&](Ops& ops, bool round_inputs, DType in, DType out) {
    auto put_in = [&](const std::vector<float>& x, const Shape& sh) { return put(ops, round_inputs ? rounded(x) : x, sh, in); };
    const Tensor pos = put_ids(ops, batch.positions), doc = put_ids(ops, batch.doc_ids);
    const Tensor o = ops.allocate({B, T, NH, HS}, out), lse = ops.allocate({B, NH, T});
    ops.attention_fwd(put_in(q, {B, T, NH, HS}), put_in(k, {B, T, KVH, HS}), put_in(v, {B, T, KVH, HS}), pos, pos, doc,
                      doc, o, lse, s);
    return std::pair{get(ops, o), get(ops, lse)};
  };
  const auto exact = forward(*r.f32, true, DType::F32, DType::F32), reference = forward(*r.f32, false, DType::F32, DType::F32);
  for (const DType out : {DType::BF16, DType::F32}) {
    const auto mixed = forward(*r.bf16, false, DType::BF16, out);
    expect_output(out == DType::BF16 ? "window attention o" : "window attention o f32", mixed.first, exact.first,
                  reference.first, out == DType::BF16);
    expect_output("window attention lse", mixed.second, exact.second, reference.second, false);
  }
  // Backward from a bf16 o: against fp32 on round(q, k, v, dout) and round(o).
  const std::vector<float> o_rounded = rounded(exact.first);
  auto backward = [&](Ops& ops, DType in, const std::vector<float>& qv, const std::vector<float>& kv,
                      const std::vector<float>& vv, const std::vector<float>& ov, const std::vector<float>& dov) {
    const Tensor pos = put_ids(ops, batch.positions), doc = put_ids(ops, batch.doc_ids);
    const Tensor dq = ops.zeros({B, T, NH, HS}), dk = ops.zeros({B, T, KVH, HS}), dv = ops.zeros({B, T, KVH, HS});
    ops.attention_bwd(put(ops, qv, {B, T, NH, HS}, in), put(ops, kv, {B, T, KVH, HS}, in), put(ops, vv, {B, T, KVH, HS}, in),
                      put(ops, ov, {B, T, NH, HS}, in), put(ops, exact.second, {B, NH, T}, DType::F32),
                      put(ops, dov, {B, T, NH, HS}, in), pos, pos, doc, doc, dq, dk, dv, s);
    return std::vector<std::vector<float>>{get(ops, dq), get(ops, dk), get(ops, dv)};
  };
  const auto m = backward(*r.bf16, DType::BF16, q, k, v, o_rounded, dout);
  const auto e = backward(*r.f32, DType::F32, rounded(q), rounded(k), rounded(v), o_rounded, rounded(dout));
  const auto f = backward(*r.f32, DType::F32, q, k, v, reference.first, dout);
  const char* names[] = {"window attention dq", "window attention dk", "window attention dv"};
  for (int i = 0; i < 3; ++i) expect_output(names[i], m[static_cast<size_t>(i)], e[static_cast<size_t>(i)], f[static_cast<size_t>(i)], false);
}

TEST(CpuOpsBf16, AttentionOnMultiTileRowsWithAWindow) { expect_windowed_attention(0.0f); }

// Cap 0.5 on scaled scores of standard deviation ~0.33: about 1 in 8 beyond half the cap, where tanh bends.
TEST(CpuOpsBf16, SoftcappedAttentionOnMultiTileRowsWithAWindow) { expect_windowed_attention(0.5f); }

TEST(CpuOpsBf16, BiasAddAndBackwardOnBf16Rows) {
  Runs r;
  const int64_t N = 19, C = 40;
  const std::vector<float> y = random_floats(N * C, 13), b = random_floats(C, 14);
  const Tensor y16 = put(*r.bf16, y, {N, C}, DType::BF16), yr = put(*r.f32, rounded(y), {N, C}, DType::F32),
               y32 = put(*r.f32, y, {N, C}, DType::F32);
  r.bf16->bias_add(y16, put(*r.bf16, b, {C}, DType::F32));
  r.f32->bias_add(yr, put(*r.f32, b, {C}, DType::F32));
  r.f32->bias_add(y32, put(*r.f32, b, {C}, DType::F32));
  expect_output("bias_add", get(*r.bf16, y16), get(*r.f32, yr), get(*r.f32, y32), true);
  const Tensor db16 = r.bf16->zeros({C}), dbr = r.f32->zeros({C}), db32 = r.f32->zeros({C});
  r.bf16->bias_bwd(put(*r.bf16, y, {N, C}, DType::BF16), db16);
  r.f32->bias_bwd(put(*r.f32, rounded(y), {N, C}, DType::F32), dbr);
  r.f32->bias_bwd(put(*r.f32, y, {N, C}, DType::F32), db32);
  expect_output("bias_bwd", get(*r.bf16, db16), get(*r.f32, dbr), get(*r.f32, db32), false);
}

TEST(CpuOpsBf16, EveryGemmIsTheBf16OneUnderABf16ComputeDtype) {
  Runs r;
  const int64_t M = 33, N = 47, K = 129;
  const std::vector<float> a = random_floats(M * K, 15), b = random_floats(N * K, 16);
  const Tensor c16 = r.bf16->allocate({M, N}), c32 = r.f32->allocate({M, N});
  r.bf16->matmul(put(*r.bf16, a, {M, K}, DType::F32), false, put(*r.bf16, b, {N, K}, DType::F32), true, c16);
  r.f32->matmul(put(*r.f32, a, {M, K}, DType::F32), false, put(*r.f32, b, {N, K}, DType::F32), true, c32);
  std::vector<float> want(static_cast<size_t>(M * N));
  cpu::matmul_bf16({a.data(), false}, false, {b.data(), false}, true, {want.data(), false}, M, N, K, 1.0f, 0.0f);
  const std::vector<float> got = get(*r.bf16, c16), fp32 = get(*r.f32, c32);
  EXPECT_EQ(got, want) << "F32 x F32 under a BF16 compute dtype must be the bf16 GEMM";
  EXPECT_NE(got, fp32) << "the bf16 GEMM rounds its operands: it cannot equal the fp32 product on these inputs";
  EXPECT_LE(normalized_error(got, fp32), kBf16Bound);
}

TEST(CpuOpsBf16, FusedLossOnBf16HiddenStates) {
  Runs r;
  const int64_t N = 29, C = 48, V = 211;
  const std::vector<float> h = random_floats(N * C, 17), w = random_floats(V * C, 18, 0.5f);
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[static_cast<size_t>(i)] = i % 5 == 0 ? -100 : static_cast<int32_t>(i * 13 % V);
  auto run = [&](Ops& ops, const std::vector<float>& hv, const std::vector<float>& wv, DType hd, std::vector<float>* dh,
                 std::vector<float>* dw) {
    const Tensor ht = put(ops, hv, {N, C}, hd), wt = put(ops, wv, {V, C}, DType::F32), y = put_ids(ops, targets);
    const Tensor dht = ops.allocate({N, C}), dwt = ops.zeros({V, C});
    int64_t valid = 0;
    const double loss = ops.cross_entropy_fwd_bwd(ht, wt, y, 0.01f, dht, dwt, 8, &valid);
    *dh = get(ops, dht);
    *dw = get(ops, dwt);
    return loss;
  };
  std::vector<float> dh16, dw16, dhr, dwr, dh32, dw32;
  const double l16 = run(*r.bf16, h, w, DType::BF16, &dh16, &dw16);
  const double l32 = run(*r.f32, h, w, DType::F32, &dh32, &dw32);
  // The loss of the bf16 path = fp32 loss of the bf16-rounded hidden states and head (products exact,
  // only the fp32 summation order of the GEMM engines differs: 1e-5 relative).
  std::vector<float> hr = rounded(h), wr = rounded(w);
  const double lr = run(*r.f32, hr, wr, DType::F32, &dhr, &dwr);
  EXPECT_LE(std::abs(l16 - lr) / std::abs(lr), 1e-5);
  EXPECT_LE(std::abs(l16 - l32) / std::abs(l32), kBf16Bound);
  // Gradients: the backward GEMMs round dlogits to bf16 too (as autocast's bf16 lm_head backward).
  EXPECT_LE(normalized_error(dh16, dh32), kBf16Bound);
  EXPECT_LE(normalized_error(dw16, dw32), kBf16Bound);
  EXPECT_GT(normalized_error(dh16, dh32), 0.0) << "the bf16 path must not be the fp32 one";
  std::printf("[ measured ] fused loss: loss %.2e, dhidden %.2e, dweight %.2e normalised vs fp32\n",
              std::abs(l16 - l32) / std::abs(l32), normalized_error(dh16, dh32), normalized_error(dw16, dw32));
}

}  // namespace
}  // namespace trlhpc
