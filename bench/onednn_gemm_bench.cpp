// oneDNN's bf16 matmul against trlhpc's own bf16 GEMM (issue 23: "hand-written, or oneDNN if it measures
// faster"), on the linear-layer shapes of bench/gemm_bench.cpp: forward y = x W^T, input gradient
// dx = dy W, weight gradient dW = dy^T x, in GFLOP/s, with trlhpc's fp32 GEMM for reference.
//   onednn_gemm_bench [--tokens N] [--hidden C] [--ffn F] [--repeat R] [--rounds N] [--only SHAPE] [--f32-dst]
//                     [--cpu_bf16_gemm auto|amx|avx512bf16|f32]
// Both bf16 columns read a and b as bf16 and write c as bf16 (gemm_bench --bf16-operands, the stored
// activations of --bf16); --f32-dst writes c as fp32 in both instead (the GEMMs into the residual stream
// and the weight gradients). Products and sums in fp32 in both. The operands sit in memory exactly as
// trlhpc's callers hold them (row-major, the transposes as strides), so both libraries pack per call.
// oneDNN's primitive is created once per shape before anything is timed, as a framework would cache it.
// Each round times every shape's fp32, trlhpc bf16 and oneDNN cells back to back (the two bf16 columns
// in alternating order), so a load change on a shared machine hits both; cells print min-max over the
// rounds, the ratio column oneDNN / trlhpc within a round: min-max over the rounds and their median.
// Before timing, each shape's two bf16 results are compared (the largest difference over the largest
// |trlhpc result|, and the same for each against trlhpc's fp32 GEMM on the same bf16 values; the share
// of c elements whose stored bits differ between oneDNN and trlhpc).
// The trlhpc engine is the one --bf16 training uses (cpuid; --cpu_bf16_gemm overrides). oneDNN
// runs on the OpenMP threads (OMP_NUM_THREADS); ONEDNN_VERBOSE=1 also prints its per-call lines.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <dnnl.hpp>

#include "gemm_bench_common.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace {

using trlhpc::bench::cpu_model;
using trlhpc::bench::seconds_per_call;
using trlhpc::math::bf16_bits_from_float;
using trlhpc::math::float_from_bf16_bits;
using dt = dnnl::memory::data_type;

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

// Memory descriptor of op(x) as an (rows, cols) matrix, where x is stored row-major as (rows, cols), or
// as (cols, rows) when trans: the transpose is expressed by strides, no copy.
dnnl::memory::desc view(int64_t rows, int64_t cols, bool trans, dt type) {
  return dnnl::memory::desc({rows, cols}, type, trans ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1});
}

struct Shape {
  const char *key, *name;
  const uint16_t *a16, *b16;  // the bf16 operands
  const float *a, *b;         // the same values widened, for the fp32 GEMM
  bool ta, tb;
  int64_t M, N, K;
};

struct Difference {
  double onednn_vs_trlhpc = 0, trlhpc_vs_fp32 = 0, onednn_vs_fp32 = 0;
};

// max |x - ref| / max |ref|.
template <class X, class R>
double normalised_max_error(const X& x, const R& ref, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(x(i)) - ref(i)));
    scale = std::max(scale, std::fabs(static_cast<double>(ref(i))));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t T = 2048, C = 896, F = 4864;
  int repeat = 5, rounds = 1;
  std::string only;
  bool f32_dst = false;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "--f32-dst") {
      f32_dst = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "onednn_gemm_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    const char* value = argv[++i];
    if (opt == "--tokens") T = std::atoll(value);
    else if (opt == "--hidden") C = std::atoll(value);
    else if (opt == "--ffn") F = std::atoll(value);
    else if (opt == "--repeat") repeat = std::max(1, std::atoi(value));
    else if (opt == "--rounds") rounds = std::max(1, std::atoi(value));
    else if (opt == "--only") only = value;
    else if (opt == "--cpu_bf16_gemm") {
      const std::string error = trlhpc::cpu::choose_bf16_gemm(value);
      if (!error.empty()) {
        std::fprintf(stderr, "onednn_gemm_bench: %s\n", error.c_str());
        return 2;
      }
    }
    else {
      std::fprintf(stderr,
                   "onednn_gemm_bench: unknown option %s (see the comment at the top of bench/onednn_gemm_bench.cpp)\n",
                   opt.c_str());
      return 2;
    }
  }
  const dnnl::version_t* v = dnnl::version();
  std::printf("CPU: %s, %d OpenMP threads; tokens %ld, hidden %ld, ffn %ld; mean of %d calls, %d round(s); "
              "bf16 a, b; %s c\n",
              cpu_model().c_str(), omp_get_max_threads(), static_cast<long>(T), static_cast<long>(C),
              static_cast<long>(F), repeat, rounds, f32_dst ? "fp32" : "bf16");
  std::printf("trlhpc bf16 engine: %s\n", trlhpc::cpu::bf16_gemm_name().c_str());
  std::printf("oneDNN %d.%d.%d (%s), CPU runtime %s, effective ISA %s\n", v->major, v->minor, v->patch, v->hash,
              v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB" : "other",
              isa_name(dnnl::get_effective_cpu_isa()));

  // Random operands (uniform in [-1, 1), rounded to bf16), so a wrongly transposed operand would show
  // in the comparison; the fp32 copies hold the same values.
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto fill = [&](std::vector<uint16_t>& bits, std::vector<float>& wide, size_t n) {
    bits.resize(n);
    wide.resize(n);
    for (size_t i = 0; i < n; ++i) {
      bits[i] = bf16_bits_from_float(uniform(rng));
      wide[i] = float_from_bf16_bits(bits[i]);
    }
  };
  std::vector<uint16_t> x16, w16, dy16;
  std::vector<float> x, w, dy;
  fill(x16, x, static_cast<size_t>(T * C));
  fill(w16, w, static_cast<size_t>(F * C));
  fill(dy16, dy, static_cast<size_t>(T * F));
  const Shape shapes[] = {
      {"forward", "forward  y = x W^T", x16.data(), w16.data(), x.data(), w.data(), false, true, T, F, C},
      {"dgrad", "dgrad   dx = dy W ", dy16.data(), w16.data(), dy.data(), w.data(), false, false, T, C, F},
      {"wgrad", "wgrad   dW = dy^T x", dy16.data(), x16.data(), dy.data(), x.data(), true, false, F, C, T}};
  const double flops = 2.0 * T * C * F;

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dt dst_type = f32_dst ? dt::f32 : dt::bf16;
  const size_t dst_bytes = f32_dst ? 4 : 2;
  struct Prepared {
    dnnl::matmul prim;
    dnnl::memory a, b, c;
    std::vector<unsigned char> c_trlhpc, c_onednn;  // results, bf16 or fp32
    std::vector<float> c_fp32;
  };
  std::vector<Prepared> prepared(3);
  for (int s = 0; s < 3; ++s) {
    const Shape& sh = shapes[s];
    Prepared& p = prepared[s];
    p.c_trlhpc.resize(static_cast<size_t>(sh.M * sh.N) * dst_bytes);
    p.c_onednn.resize(p.c_trlhpc.size());
    p.c_fp32.resize(static_cast<size_t>(sh.M * sh.N));
    const auto a_md = view(sh.M, sh.K, sh.ta, dt::bf16), b_md = view(sh.K, sh.N, sh.tb, dt::bf16);
    const auto c_md = view(sh.M, sh.N, false, dst_type);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    std::printf("oneDNN matmul implementation, %s: %s\n", sh.key, pd.impl_info_str());
    p.prim = dnnl::matmul(pd);
    p.a = dnnl::memory(a_md, eng, const_cast<uint16_t*>(sh.a16));
    p.b = dnnl::memory(b_md, eng, const_cast<uint16_t*>(sh.b16));
    p.c = dnnl::memory(c_md, eng, p.c_onednn.data());
  }
  const auto run_trlhpc = [&](int s) {
    const Shape& sh = shapes[s];
    trlhpc::cpu::matmul_bf16({sh.a16, true}, sh.ta, {sh.b16, true}, sh.tb, {prepared[s].c_trlhpc.data(), !f32_dst},
                             sh.M, sh.N, sh.K, 1.0f, 0.0f);
  };
  const auto run_onednn = [&](int s) {
    Prepared& p = prepared[s];
    p.prim.execute(strm, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
    strm.wait();
  };
  const auto run_fp32 = [&](int s) {
    const Shape& sh = shapes[s];
    trlhpc::cpu::matmul(sh.a, sh.ta, sh.b, sh.tb, prepared[s].c_fp32.data(), sh.M, sh.N, sh.K, 1.0f, 0.0f);
  };

  // Equal work: the two bf16 results against each other and against the fp32 GEMM on the same values.
  std::printf("%-22s %18s %18s %18s %18s\n", "max |diff| / max |ref|", "oneDNN vs trlhpc", "trlhpc vs fp32",
              "oneDNN vs fp32", "c bits differing");
  for (int s = 0; s < 3; ++s) {
    if (!only.empty() && only != shapes[s].key) continue;
    run_trlhpc(s);
    run_onednn(s);
    run_fp32(s);
    const Prepared& p = prepared[s];
    const auto value = [&](const std::vector<unsigned char>& c) {
      return [&c, f32 = f32_dst](size_t i) -> float {
        if (f32) {
          float f;
          std::memcpy(&f, c.data() + 4 * i, 4);
          return f;
        }
        uint16_t h;
        std::memcpy(&h, c.data() + 2 * i, 2);
        return float_from_bf16_bits(h);
      };
    };
    const auto fp32 = [&p](size_t i) { return p.c_fp32[i]; };
    const size_t n = p.c_fp32.size();
    size_t differing = 0;  // elements whose stored oneDNN and trlhpc results are not the same bits
    for (size_t i = 0; i < n; ++i)
      differing += std::memcmp(p.c_onednn.data() + i * dst_bytes, p.c_trlhpc.data() + i * dst_bytes, dst_bytes) != 0;
    char share[32];
    std::snprintf(share, sizeof share, "%.2f%%", 100.0 * static_cast<double>(differing) / static_cast<double>(n));
    std::printf("%-22s %18.3g %18.3g %18.3g %18s\n", shapes[s].name,
                normalised_max_error(value(p.c_onednn), value(p.c_trlhpc), n),
                normalised_max_error(value(p.c_trlhpc), fp32, n), normalised_max_error(value(p.c_onednn), fp32, n),
                share);
  }

  // rate[shape][column] min and max over rounds; columns fp32, trlhpc bf16, oneDNN; ratio per round.
  double lo[3][3], hi[3][3];
  std::vector<double> ratios[3];
  for (int s = 0; s < 3; ++s) {
    std::fill(lo[s], lo[s] + 3, 1e300);
    std::fill(hi[s], hi[s] + 3, -1.0);
  }
  for (int round = 0; round < rounds; ++round)
    for (int s = 0; s < 3; ++s) {
      if (!only.empty() && only != shapes[s].key) continue;
      double rate[3];
      rate[0] = flops / seconds_per_call([&] { run_fp32(s); }, repeat) * 1e-9;
      const bool onednn_first = round % 2 == 1;
      if (onednn_first) rate[2] = flops / seconds_per_call([&] { run_onednn(s); }, repeat) * 1e-9;
      rate[1] = flops / seconds_per_call([&] { run_trlhpc(s); }, repeat) * 1e-9;
      if (!onednn_first) rate[2] = flops / seconds_per_call([&] { run_onednn(s); }, repeat) * 1e-9;
      for (int col = 0; col < 3; ++col) {
        lo[s][col] = std::min(lo[s][col], rate[col]);
        hi[s][col] = std::max(hi[s][col], rate[col]);
      }
      ratios[s].push_back(rate[2] / rate[1]);
    }
  std::printf("%-22s %14s %14s %14s %28s\n", "GEMM (GFLOP/s)", "fp32", "trlhpc bf16", "oneDNN bf16",
              "oneDNN / trlhpc");
  for (int s = 0; s < 3; ++s) {
    if (!only.empty() && only != shapes[s].key) continue;
    std::printf("%-22s", shapes[s].name);
    for (int col = 0; col < 3; ++col) {
      char cell[32];
      if (rounds == 1) std::snprintf(cell, sizeof cell, "%.0f", hi[s][col]);
      else std::snprintf(cell, sizeof cell, "%.0f-%.0f", lo[s][col], hi[s][col]);
      std::printf(" %14s", cell);
    }
    std::vector<double>& r = ratios[s];
    std::sort(r.begin(), r.end());
    const double median = r.size() % 2 ? r[r.size() / 2] : 0.5 * (r[r.size() / 2 - 1] + r[r.size() / 2]);
    char cell[64];
    if (rounds == 1) std::snprintf(cell, sizeof cell, "%.2f", median);
    else std::snprintf(cell, sizeof cell, "%.2f-%.2f (median %.2f)", r.front(), r.back(), median);
    std::printf(" %28s\n", cell);
  }
  return 0;
}
