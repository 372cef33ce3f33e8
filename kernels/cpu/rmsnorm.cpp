// RMSNorm (Zhang & Sennrich 2019; Llama/Qwen2 "RMSNorm") for the CPU backend (fp32, OpenMP).
//
// Forward, per row n of x (N, C):
//   rstd[n] = 1 / sqrt(mean_c x[n,c]^2 + eps)            (sum of squares accumulated in double)
//   y[n,c]  = x[n,c] * rstd[n] * w[c]
// Backward, with g[c] = dy[n,c] * w[c] and xhat = x * rstd:
//   dx[n,c] = rstd[n] * (g[c] - xhat[n,c] * mean_c'(g[c'] * xhat[n,c']))        (overwrite)
//   dw[c]  += sum_n dy[n,c] * xhat[n,c]                                           (accumulate)
// The dw sum is split in fixed blocks of kRowsPerBlock rows: each block writes its partial row into a
// scratch (blocks, C) during the dx pass (x and dy are then still in cache), and the partials are
// added in block order, so dw does not depend on the thread count.
// x and y are fp32 or bf16 bits (--bf16); the arithmetic is fp32 either way (element_io.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/element_io.hpp"
#include "kernels/cpu/lane_sum.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

constexpr int64_t kRowsPerBlock = 32;

template <class In, class Out>
void rmsnorm_fwd_impl(const In* x, const float* weight, Out* y, float* rstd, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const In* xr = x + n * C;  // (C)
    Out* yr = y + n * C;       // (C)
    const double ss = lane_sum<double>(C, [xr](int64_t c) {
      const float xc = load_element(xr, c);
      return static_cast<double>(xc) * xc;
    });
    const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + static_cast<double>(eps)));
    rstd[n] = r;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store_element(yr, c, load_element(xr, c) * r * weight[c]);
  }
}

template <class In>
void rmsnorm_bwd_impl(const In* x, const float* weight, const float* rstd, const float* dy, float* dx, float* dweight,
                      int64_t N, int64_t C) {
  const int64_t blocks = (N + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<float> partial(static_cast<size_t>(blocks * C));  // (blocks, C) per-block sums of dy*xhat
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float* dw_part = partial.data() + blk * C;  // (C)
    std::fill(dw_part, dw_part + C, 0.0f);
    const int64_t n1 = std::min(N, (blk + 1) * kRowsPerBlock);
    for (int64_t n = blk * kRowsPerBlock; n < n1; ++n) {
      const In* xr = x + n * C;       // (C)
      const float* dyr = dy + n * C;  // (C)
      float* dxr = dx + n * C;        // (C)
      const float r = rstd[n];
      // sum_c dy*w*x  (times rstd gives sum g*xhat)
      const double dot = lane_sum<double>(
          C, [=](int64_t c) { return static_cast<double>(dyr[c] * weight[c]) * load_element(xr, c); });
      const float k = static_cast<float>(dot * r * r / static_cast<double>(C));  // mean(g*xhat) * rstd
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float xc = load_element(xr, c);
        dxr[c] = r * (dyr[c] * weight[c] - xc * k);
        dw_part[c] += dyr[c] * (xc * r);
      }
    }
  }
  if (!dweight) return;  // no weight gradient wanted (a frozen norm)
  constexpr int64_t kCols = 64;
  const int64_t col_blocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int64_t cb = 0; cb < col_blocks; ++cb) {
    const int64_t c0 = cb * kCols, width = std::min(kCols, C - c0);
    double acc[kCols] = {};
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const float* part = partial.data() + blk * C + c0;  // (width)
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) acc[c] += part[c];
    }
    for (int64_t c = 0; c < width; ++c) dweight[c0 + c] += static_cast<float>(acc[c]);
  }
}

}  // namespace

void rmsnorm_fwd(const float* x, const float* weight, float* y, float* rstd, int64_t N, int64_t C, float eps) {
  rmsnorm_fwd_impl(x, weight, y, rstd, N, C, eps);
}
void rmsnorm_fwd(const float* x, const float* weight, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps) {
  rmsnorm_fwd_impl(x, weight, y, rstd, N, C, eps);
}
void rmsnorm_fwd(const uint16_t* x, const float* weight, uint16_t* y, float* rstd, int64_t N, int64_t C, float eps) {
  rmsnorm_fwd_impl(x, weight, y, rstd, N, C, eps);
}
void rmsnorm_bwd(const float* x, const float* weight, const float* rstd, const float* dy, float* dx, float* dweight,
                 int64_t N, int64_t C) {
  rmsnorm_bwd_impl(x, weight, rstd, dy, dx, dweight, N, C);
}
void rmsnorm_bwd(const uint16_t* x, const float* weight, const float* rstd, const float* dy, float* dx,
                 float* dweight, int64_t N, int64_t C) {
  rmsnorm_bwd_impl(x, weight, rstd, dy, dx, dweight, N, C);
}

}  // namespace trlhpc::cpu
