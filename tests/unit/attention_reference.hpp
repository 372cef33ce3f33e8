#pragma once
// The naive double-precision attention reference shared by the CPU attention tests
// (test_cpu_attention.cpp, test_cpu_attention_window.cpp): a Problem (shapes, inputs, mask metadata),
// the reference forward/backward, the kernel runners and the tolerances (reasoned below).
// Mask: same document, key not later than the query, and with window W > 0 also pos_q - pos_k < W.
// Softcap c > 0 (Gemma 2): each scaled score s becomes c tanh(s / c) before the mask (transformers'
// eager_attention_forward), and the backward multiplies dS by 1 - tanh(s / c)^2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::testing::attention_reference {


using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

// One attention problem: shapes, inputs and the mask metadata.
struct Problem {
  int64_t B, Tq, Tk, NH, KVH, HS;
  float scale;
  std::vector<float> q, k, v, dout;                 // (B,Tq,NH,HS), (B,Tk,KVH,HS) x2, (B,Tq,NH,HS)
  std::vector<int32_t> q_pos, q_doc, k_pos, k_doc;  // (B,Tq), (B,Tq), (B,Tk), (B,Tk)
  int64_t window = 0;                                // sliding window, 0 = none
  float softcap = 0.0f;                              // tanh softcapping of the scaled scores, 0 = none
};

inline Problem make_problem(int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, uint64_t seed) {
  Problem p{B,  Tq, Tk, NH, KVH, HS, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HS))), {}, {},
            {}, {}, {}, {}, {},  {}};
  p.q = random_floats(B * Tq * NH * HS, seed, 1.5f);
  p.k = random_floats(B * Tk * KVH * HS, seed + 1, 1.5f);
  p.v = random_floats(B * Tk * KVH * HS, seed + 2);
  p.dout = random_floats(B * Tq * NH * HS, seed + 3);
  p.q_pos.resize(B * Tq), p.q_doc.assign(B * Tq, 0), p.k_pos.resize(B * Tk), p.k_doc.assign(B * Tk, 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < Tq; ++i) p.q_pos[b * Tq + i] = static_cast<int32_t>(i);
    for (int64_t j = 0; j < Tk; ++j) p.k_pos[b * Tk + j] = static_cast<int32_t>(j);
  }
  return p;
}

// Packs documents of random lengths (1..max_len) into each row: doc ids change mid-row, positions restart.
inline void pack_documents(Problem& p, int max_len, uint64_t seed) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> len(1, max_len);
  for (int64_t b = 0; b < p.B; ++b) {
    int32_t doc = 0, pos = 0, left = len(gen);
    for (int64_t i = 0; i < p.Tq; ++i) {
      if (left-- == 0) ++doc, pos = 0, left = len(gen) - 1;
      p.q_doc[b * p.Tq + i] = p.k_doc[b * p.Tk + i] = doc + static_cast<int32_t>(100 * b);
      p.q_pos[b * p.Tq + i] = p.k_pos[b * p.Tk + i] = pos++;
    }
  }
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

inline bool allowed(const Problem& p, int64_t b, int64_t i, int64_t j) {
  const int64_t qp = p.q_pos[b * p.Tq + i], kp = p.k_pos[b * p.Tk + j];
  return p.q_doc[b * p.Tq + i] == p.k_doc[b * p.Tk + j] && qp >= kp && (p.window == 0 || qp - kp < p.window);
}

// Naive forward (and, when want_grad, the analytic backward of L = sum(o * dout)) in double.
inline Reference reference(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, bool want_grad) {
  const int64_t group = p.NH / p.KVH;
  Reference r;
  r.o.assign(p.q.size(), 0.0), r.lse.assign(p.B * p.NH * p.Tq, kNegInf);
  if (want_grad) r.dq.assign(q.size(), 0.0), r.dk.assign(k.size(), 0.0), r.dv.assign(v.size(), 0.0);
  std::vector<double> s(p.Tk), dp(p.Tk), dcap(p.Tk, 1.0);  // scores, dP, d(capped score) / d(score)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.NH; ++h)
      for (int64_t i = 0; i < p.Tq; ++i) {
        const int64_t g = h / group, qi = ((b * p.Tq + i) * p.NH + h) * p.HS;
        double mx = kNegInf;
        for (int64_t j = 0; j < p.Tk; ++j) {
          s[j] = kNegInf;
          if (!allowed(p, b, i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < p.HS; ++d) dot += q[qi + d] * k[((b * p.Tk + j) * p.KVH + g) * p.HS + d];
          s[j] = p.scale * dot;
          if (p.softcap > 0) {
            const double t = std::tanh(s[j] / p.softcap);
            s[j] = p.softcap * t, dcap[j] = 1.0 - t * t;
          }
          mx = std::max(mx, s[j]);
        }
        if (mx == kNegInf) continue;
        double sum = 0;
        for (int64_t j = 0; j < p.Tk; ++j) sum += s[j] == kNegInf ? 0.0 : std::exp(s[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(b * p.NH + h) * p.Tq + i] = lse;
        for (int64_t j = 0; j < p.Tk; ++j) {
          if (s[j] == kNegInf) continue;
          s[j] = std::exp(s[j] - lse);  // now P
          for (int64_t d = 0; d < p.HS; ++d) r.o[qi + d] += s[j] * v[((b * p.Tk + j) * p.KVH + g) * p.HS + d];
        }
        if (!want_grad) continue;
        double delta = 0;
        for (int64_t d = 0; d < p.HS; ++d) delta += p.dout[qi + d] * r.o[qi + d];
        for (int64_t j = 0; j < p.Tk; ++j) {
          if (s[j] == kNegInf) continue;
          const int64_t kj = ((b * p.Tk + j) * p.KVH + g) * p.HS;
          double dpj = 0;
          for (int64_t d = 0; d < p.HS; ++d) dpj += p.dout[qi + d] * v[kj + d];
          const double ds = s[j] * (dpj - delta) * dcap[j];
          for (int64_t d = 0; d < p.HS; ++d) {
            r.dv[kj + d] += s[j] * p.dout[qi + d];
            r.dq[qi + d] += p.scale * ds * k[kj + d];
            r.dk[kj + d] += p.scale * ds * q[qi + d];
          }
        }
      }
  return r;
}

inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

inline Reference reference(const Problem& p, bool want_grad) {
  return reference(p, to_double(p.q), to_double(p.k), to_double(p.v), want_grad);
}

struct Result {
  std::vector<float> o, lse, dq, dk, dv;
};

inline Result run_forward(const Problem& p) {
  Result r;
  r.o.assign(p.q.size(), kNaN), r.lse.assign(p.B * p.NH * p.Tq, kNaN);
  trlhpc::cpu::attention_fwd(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.k_pos.data(), p.q_doc.data(),
                             p.k_doc.data(), r.o.data(), r.lse.data(), p.B, p.Tq, p.Tk, p.NH, p.KVH, p.HS, p.scale,
                             p.window, p.softcap);
  return r;
}

// Backward from the given (o, lse), accumulating into r.dq/dk/dv (which must be sized).
inline void run_backward(const Problem& p, const std::vector<float>& o, const std::vector<float>& lse, Result& r) {
  trlhpc::cpu::attention_bwd(p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), p.dout.data(), p.q_pos.data(),
                             p.k_pos.data(), p.q_doc.data(), p.k_doc.data(), r.dq.data(), r.dk.data(), r.dv.data(), p.B,
                             p.Tq, p.Tk, p.NH, p.KVH, p.HS, p.scale, p.window, p.softcap);
}

inline Result run_both(const Problem& p) {
  Result r = run_forward(p);
  r.dq.assign(p.q.size(), 0.0f), r.dk.assign(p.k.size(), 0.0f), r.dv.assign(p.v.size(), 0.0f);
  run_backward(p, r.o, r.lse, r);
  return r;
}

// fp32 kernel vs double reference. o is a convex combination of v (|v| <= 1) and lse is O(1..10); the
// largest error seen over all these tests is 2e-6 absolute (fp32 dot products of HS terms, the running
// softmax rescales, a 2-ulp exp), so 2e-5 leaves a 10x margin while a wrong mask or rescale is off by
// O(0.1). all_close treats -inf == -inf as a mismatch (inf - inf is NaN), so both sides map -inf to
// -1e30 first; a -inf on one side only still fails.
inline void expect_forward_matches(const Result& got, const Reference& want) {
  EXPECT_TRUE(all_close(got.o, want.o, 2e-5, 2e-5)) << "o";
  std::vector<float> lse_got = got.lse;
  std::vector<double> lse_want = want.lse;
  for (float& x : lse_got) x = std::isinf(x) && x < 0 ? -1e30f : x;
  for (double& x : lse_want) x = std::isinf(x) && x < 0 ? static_cast<double>(-1e30f) : x;
  EXPECT_TRUE(all_close(lse_got, lse_want, 2e-5, 2e-5)) << "lse";
}

// Gradients are sums over up to Tk (Tq) products with cancellation in dS = P (dP - delta); each term
// is O(1) with fp32 error ~1e-7 and the largest error seen is 2e-6, so again 2e-5 (10x margin).
inline void expect_backward_matches(const Result& got, const Reference& want, double tol = 2e-5) {
  EXPECT_TRUE(all_close(got.dq, want.dq, tol, tol)) << "dq";
  EXPECT_TRUE(all_close(got.dk, want.dk, tol, tol)) << "dk";
  EXPECT_TRUE(all_close(got.dv, want.dv, tol, tol)) << "dv";
}

// Central finite differences of L = sum(o * dout) through the double reference, for every element.
// The kernel's forward and backward of `p` against the double reference, at the bounds above.
inline void expect_matches_reference(const Problem& p) {
  const Result got = run_both(p);
  const Reference want = reference(p, true);
  expect_forward_matches(got, want);
  expect_backward_matches(got, want);
}

inline std::vector<double> finite_difference(const Problem& p, int which /* 0 q, 1 k, 2 v */) {
  std::vector<double> x[3] = {to_double(p.q), to_double(p.k), to_double(p.v)};
  auto loss = [&]() {
    const Reference r = reference(p, x[0], x[1], x[2], false);
    double l = 0;
    for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * p.dout[i];
    return l;
  };
  const double h = 1e-4;
  std::vector<double> grad(x[which].size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double x0 = x[which][i];
    x[which][i] = x0 + h;
    const double up = loss();
    x[which][i] = x0 - h;
    const double down = loss();
    x[which][i] = x0;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

}  // namespace trlhpc::testing::attention_reference
