// Prints a hash of every fp32 CPU kernel's output on fixed random inputs (shapes of the checkpoint_v1
// fixture's model, odd row counts, a tail past 16 lanes). tests/kernel_bits/test_kernel_bits.sh builds
// it with kernels/cpu under several -march / vector-width choices and requires the same hashes: the
// kernels' bits must not depend on the CPU the binary was built for (docs/CONTRACT.md).
#include <cstdio>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "trlhpc/kernels/cpu.hpp"
using namespace trlhpc::cpu;
static std::mt19937 rng(7);
static std::vector<float> rnd(size_t n, float s = 1) { std::normal_distribution<float> d(0, s); std::vector<float> v(n); for (auto& x : v) x = d(rng); return v; }
static void fp(const char* name, const void* p, size_t bytes) {
  unsigned long long h = 1469598103934665603ull; const unsigned char* c = (const unsigned char*)p;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  printf("%-22s %016llx\n", name, h);
}
template <class T> static void fpv(const char* n, const std::vector<T>& v) { fp(n, v.data(), v.size() * sizeof(T)); }
// `kernel_fingerprint [--cpu_gemm ENGINE]`: the fp32 GEMM engine to hash (default auto).
int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--cpu_gemm")) {
    const std::string error = choose_cpu_gemm(argv[2]);
    if (!error.empty()) { std::fprintf(stderr, "kernel_fingerprint: %s\n", error.c_str()); return 2; }
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: kernel_fingerprint [--cpu_gemm auto|avx512|avx2|openblas]\n");
    return 2;
  }
  const int64_t N = 74, C = 16, F = 32, V = 910, B = 2, T = 37, NH = 4, KVH = 2, HS = 4;
  { auto a = rnd(N * C), b = rnd(F * C), c = rnd(N * F); matmul(a.data(), false, b.data(), true, c.data(), N, F, C, 1, 0); fpv("matmul_nt", c);
    auto dc = rnd(N * F), dw = rnd(F * C); matmul(dc.data(), true, a.data(), false, dw.data(), F, C, N, 1, 1); fpv("matmul_tn", dw);
    std::vector<float> db(F, 0.5f); bias_bwd(dc.data(), db.data(), N, F); fpv("bias_bwd", db); }
  { auto x = rnd(N * C), w = rnd(C), dy = rnd(N * C); std::vector<float> y(N * C), r(N), dx(N * C), dw(C, 0);
    rmsnorm_fwd(x.data(), w.data(), y.data(), r.data(), N, C, 1e-6f); fpv("rms_y", y); fpv("rms_r", r);
    rmsnorm_bwd(x.data(), w.data(), r.data(), dy.data(), dx.data(), dw.data(), N, C); fpv("rms_dx", dx); fpv("rms_dw", dw); }
  { std::vector<int32_t> pos(N); for (int i = 0; i < N; ++i) pos[i] = i % T; std::vector<float> inv(HS / 2);
    for (int i = 0; i < HS / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / HS);
    auto x = rnd(N * NH * HS); rope_fwd(x.data(), pos.data(), inv.data(), N, NH, HS); fpv("rope_fwd", x);
    rope_bwd(x.data(), pos.data(), inv.data(), N, NH, HS); fpv("rope_bwd", x); }
  { auto q = rnd(B * T * NH * HS), k = rnd(B * T * KVH * HS), v = rnd(B * T * KVH * HS), dout = rnd(B * T * NH * HS);
    std::vector<int32_t> pos(B * T), doc(B * T); for (int i = 0; i < B * T; ++i) { pos[i] = i % T; doc[i] = (i % T) / 20; }
    std::vector<float> o(q.size()), lse(B * NH * T), dq(q.size()), dk(k.size()), dv(v.size());
    attention_fwd(q.data(), k.data(), v.data(), pos.data(), pos.data(), doc.data(), doc.data(), o.data(), lse.data(), B, T, T, NH, KVH, HS, 0.5f);
    fpv("attn_o", o); fpv("attn_lse", lse);
    attention_bwd(q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), pos.data(), pos.data(), doc.data(), doc.data(), dq.data(), dk.data(), dv.data(), B, T, T, NH, KVH, HS, 0.5f);
    fpv("attn_dq", dq); fpv("attn_dk", dk); fpv("attn_dv", dv); }
  { auto g = rnd(N * F), u = rnd(N * F), d = rnd(N * F); std::vector<float> o(N * F), dg(N * F), du(N * F);
    swiglu_fwd(g.data(), u.data(), o.data(), N * F); fpv("swiglu", o); swiglu_bwd(g.data(), u.data(), d.data(), dg.data(), du.data(), N * F); fpv("swiglu_dg", dg); fpv("swiglu_du", du); }
  { auto h = rnd(N * C), w = rnd(V * C, 0.02f); std::vector<int32_t> t(N); for (int i = 0; i < N; ++i) t[i] = i % 5 == 0 ? -100 : (i * 37) % V;
    std::vector<float> dh(N * C), dw(V * C); int64_t valid = 0; CrossEntropyMetrics m;
    double l = cross_entropy_fwd_bwd(h.data(), w.data(), t.data(), N, C, V, 1.0f / 60, dh.data(), dw.data(), 32, &valid, &m);
    fp("ce_loss", &l, 8); fp("ce_entropy", &m.entropy_sum, 8); fpv("ce_dh", dh); fpv("ce_dw", dw); }
  { auto p = rnd(5000), g = rnd(5000), mm = rnd(5000, 0.1f), vv = rnd(5000, 0.1f); for (auto& x : vv) x = x * x;
    adamw_step(p.data(), g.data(), mm.data(), vv.data(), 5000, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3); fpv("adamw_p", p);
    double s = sum_of_squares(g.data(), 5000); fp("sumsq", &s, 8); }
  { std::vector<int32_t> ids(N); for (int i = 0; i < N; ++i) ids[i] = (i * 13) % V; auto d = rnd(N * C); std::vector<float> dt(V * C, 0);
    embedding_bwd(ids.data(), d.data(), dt.data(), N, C, V, 0); fpv("emb_bwd", dt); }
}
