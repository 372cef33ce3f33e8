// Flash-attention forward/backward with position + document-id masks, GQA and masked-tile skipping,
// and the log-sum-exp merge of ring attention (see attention.cuh): the host side, which checks the
// dimensions, picks the tiles, computes the tiles' position/document ranges and launches the kernels of
// attention_fwd.cuh and attention_bwd.cuh (building blocks in attention_tiles.cuh).
#include <algorithm>
#include <cmath>
#include <string>

#include "attention.cuh"
#include "attention_bwd.cuh"
#include "attention_fwd.cuh"
#include "attention_tiles.cuh"
#include "device_math.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda {

using namespace attention_detail;

namespace {

// ranges (B, tiles): min/max of pos and doc over each tile of `tile` rows.
__global__ void tile_ranges_kernel(const int32_t* __restrict__ pos, const int32_t* __restrict__ doc, int64_t B,
                                   int64_t T, int tile, int tiles, TileRange* __restrict__ ranges) {
  const int64_t item = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (item >= B * tiles) return;
  const int64_t b = item / tiles, t0 = item % tiles * tile, t1 = std::min<int64_t>(T, t0 + tile);
  TileRange r{INT_MAX, INT_MIN, INT_MAX, INT_MIN};
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t p = pos[b * T + t], d = doc[b * T + t];
    r.pos_min = min(r.pos_min, p), r.pos_max = max(r.pos_max, p);
    r.doc_min = min(r.doc_min, d), r.doc_max = max(r.doc_max, d);
  }
  ranges[item] = r;
}

// ---- host side ----------------------------------------------------------------------------------------
using kernels::AttentionTiles;

// The tiles of one pass on this device (attention_smem_plan.hpp), or a RuntimeFailure naming the head size.
template <class T>
AttentionTiles choose_tiles(int HS, AttentionPass pass, const SmemLimits& limits) {
  const AttentionTiles t = kernels::choose_attention_tiles(TilePad<T>::kSeparateProbabilities, HS, pass, limits);
  if (t.Br == 0)
    throw_runtime_failure("CUDA", "attention tile choice",
                          "head size " + std::to_string(HS) + " needs more shared memory than the device's " +
                              std::to_string(limits.per_block_optin) + " bytes per block",
                          __FILE__, __LINE__);
  return t;
}

template <class T>
void check_dims(const AttentionDims& d) {
  TRLHPC_REQUIRE(d.KVH > 0 && d.NH % d.KVH == 0, "attention: " + std::to_string(d.NH) +
                                                    " query heads are not a multiple of " + std::to_string(d.KVH) +
                                                    " key/value heads (GQA needs whole groups)");
  TRLHPC_REQUIRE(d.HS > 0 && d.HS <= 512, "attention: head size " + std::to_string(d.HS) + " is outside 1..512");
  if constexpr (TilePad<T>::kSeparateProbabilities)
    TRLHPC_REQUIRE(d.HS % 16 == 0, "attention: bf16 attention runs on tensor cores and needs a head size that is a "
                                   "multiple of 16, got " + std::to_string(d.HS) + "; train in fp32");
  TRLHPC_ASSERT(d.B <= 65535 && d.NH <= 65535, "attention grid: B and NH must be <= 65535");
  TRLHPC_REQUIRE(d.softcap >= 0.0f && std::isfinite(d.softcap),
                 "attention: softcap " + std::to_string(d.softcap) + " is not a positive number; use 0 for none");
}

// Tile ranges of q (tile Br) and k (tile Bc) for a launch.
struct RangeBuffers {
  DeviceBuffer<TileRange> q, k;
  int q_tiles = 0, k_tiles = 0;
};

RangeBuffers tile_ranges(const int32_t* q_pos, const int32_t* q_doc, const int32_t* k_pos, const int32_t* k_doc,
                         const AttentionDims& d, int Br, int Bc, DeviceAllocator& allocator, cudaStream_t stream) {
  RangeBuffers r;
  r.q_tiles = static_cast<int>((d.Tq + Br - 1) / Br);
  r.k_tiles = static_cast<int>((d.Tk + Bc - 1) / Bc);
  r.q = DeviceBuffer<TileRange>(allocator, std::max<int64_t>(1, d.B * r.q_tiles));  // (B, q_tiles)
  r.k = DeviceBuffer<TileRange>(allocator, std::max<int64_t>(1, d.B * r.k_tiles));  // (B, k_tiles)
  if (d.B * r.q_tiles > 0) {
    tile_ranges_kernel<<<grid_for(d.B * r.q_tiles, 128, INT32_MAX), 128, 0, stream>>>(q_pos, q_doc, d.B, d.Tq, Br,
                                                                                      r.q_tiles, r.q.get());
    TRLHPC_CHECK_CUDA_LAUNCH("tile_ranges_kernel");
  }
  if (d.B * r.k_tiles > 0) {
    tile_ranges_kernel<<<grid_for(d.B * r.k_tiles, 128, INT32_MAX), 128, 0, stream>>>(k_pos, k_doc, d.B, d.Tk, Bc,
                                                                                      r.k_tiles, r.k.get());
    TRLHPC_CHECK_CUDA_LAUNCH("tile_ranges_kernel");
  }
  return r;
}

template <class T, class G>
AttentionParams<T, G> base_params(const AttentionDims& d, const RangeBuffers& r, const AttentionTiles& t) {
  AttentionParams<T, G> p{};
  p.q_ranges = r.q.get();
  p.k_ranges = r.k.get();
  p.Tq = d.Tq, p.Tk = d.Tk, p.NH = d.NH, p.KVH = d.KVH, p.HS = d.HS;
  p.Br = t.Br, p.Bc = t.Bc, p.q_tiles = r.q_tiles, p.k_tiles = r.k_tiles;
  p.scale = d.scale;
  p.window = effective_window(d.window);
  p.softcap = d.softcap;
  return p;
}

template <class Kernel>
void set_smem(Kernel kernel, int bytes) {
  TRLHPC_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace

template <class T, class G>
void attention_fwd(const T* q, const T* k, const T* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, G* o, float* lse, const AttentionDims& d,
                   const SmemLimits& smem, DeviceAllocator& allocator, cudaStream_t stream) {
  check_dims<T>(d);
  if (d.B == 0 || d.Tq == 0 || d.NH == 0) return;
  const AttentionTiles t = choose_tiles<T>(d.HS, AttentionPass::kForward, smem);
  const RangeBuffers ranges = tile_ranges(q_pos, q_doc, k_pos, k_doc, d, t.Br, t.Bc, allocator, stream);
  AttentionParams<T, G> p = base_params<T, G>(d, ranges, t);
  p.q = q, p.k = k, p.v = v, p.q_pos = q_pos, p.k_pos = k_pos, p.q_doc = q_doc, p.k_doc = k_doc;
  p.o_out = o, p.lse_out = lse;
  set_smem(attention_fwd_kernel<T, G>, t.smem);
  const dim3 grid(static_cast<unsigned>(ranges.q_tiles), static_cast<unsigned>(d.NH), static_cast<unsigned>(d.B));
  attention_fwd_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_fwd_kernel");
}

template <class T, class G>
void attention_bwd(const T* q, const T* k, const T* v, const T* o, const float* lse, const T* dout,
                   const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc, const int32_t* k_doc, G* dq,
                   G* dk, G* dv, const AttentionDims& d, const SmemLimits& smem, DeviceAllocator& allocator,
                   cudaStream_t stream) {
  check_dims<T>(d);
  if (d.B == 0 || d.Tq == 0 || d.Tk == 0 || d.NH == 0) return;  // no allowed pair: every term is zero
  DeviceBuffer<float> delta(allocator, d.B * d.NH * d.Tq);  // (B, NH, Tq)
  const int64_t delta_rows = d.B * d.Tq * d.NH;
  attention_delta_kernel<<<grid_for(delta_rows, 8, INT32_MAX), 256, 0, stream>>>(o, dout, delta.get(), d.B, d.Tq, d.NH,
                                                                                d.HS);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_delta_kernel");

  for (const bool dkdv : {true, false}) {
    const AttentionTiles t =
        choose_tiles<T>(d.HS, dkdv ? AttentionPass::kBackwardDkDv : AttentionPass::kBackwardDq, smem);
    const RangeBuffers ranges = tile_ranges(q_pos, q_doc, k_pos, k_doc, d, t.Br, t.Bc, allocator, stream);
    AttentionParams<T, G> p = base_params<T, G>(d, ranges, t);
    p.q = q, p.k = k, p.v = v, p.o = o, p.dout = dout, p.lse_in = lse, p.delta = delta.get();
    p.q_pos = q_pos, p.k_pos = k_pos, p.q_doc = q_doc, p.k_doc = k_doc;
    p.dq = dq, p.dk = dk, p.dv = dv;
    if (dkdv) {
      set_smem(attention_bwd_dkdv_kernel<T, G>, t.smem);
      const dim3 grid(static_cast<unsigned>(ranges.k_tiles), static_cast<unsigned>(d.KVH), static_cast<unsigned>(d.B));
      attention_bwd_dkdv_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
      TRLHPC_CHECK_CUDA_LAUNCH("attention_bwd_dkdv_kernel");
    } else {
      set_smem(attention_bwd_dq_kernel<T, G>, t.smem);
      const dim3 grid(static_cast<unsigned>(ranges.q_tiles), static_cast<unsigned>(d.NH), static_cast<unsigned>(d.B));
      attention_bwd_dq_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
      TRLHPC_CHECK_CUDA_LAUNCH("attention_bwd_dq_kernel");
    }
  }
}

template <class T>
int attention_blocks_per_sm(int HS, AttentionPass pass, const SmemLimits& smem) {
  const AttentionTiles t = choose_tiles<T>(HS, pass, smem);
  auto blocks = [&](auto kernel) {
    set_smem(kernel, t.smem);
    int n = 0;
    TRLHPC_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kAttnThreads, t.smem));
    return n;
  };
  switch (pass) {
    case AttentionPass::kForward: return blocks(attention_fwd_kernel<T, T>);
    case AttentionPass::kBackwardDkDv: return blocks(attention_bwd_dkdv_kernel<T, T>);
    case AttentionPass::kBackwardDq: return blocks(attention_bwd_dq_kernel<T, T>);
  }
  return 0;
}
template int attention_blocks_per_sm<float>(int, AttentionPass, const SmemLimits&);
template int attention_blocks_per_sm<bf16>(int, AttentionPass, const SmemLimits&);

template <class T>
void attention_merge(T* o_acc, float* lse_acc, const T* o_blk, const float* lse_blk, int64_t B, int64_t Tn, int NH,
                     int HS, cudaStream_t stream) {
  const int64_t rows = B * Tn * NH;
  if (rows == 0) return;
  attention_merge_kernel<<<grid_for(rows, 8, INT32_MAX), 256, 0, stream>>>(o_acc, lse_acc, o_blk, lse_blk, B, Tn, NH,
                                                                          HS);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_merge_kernel");
}

#define TRLHPC_INSTANTIATE_ATTENTION(T, G)                                                                      \
  template void attention_fwd<T, G>(const T*, const T*, const T*, const int32_t*, const int32_t*, const int32_t*, \
                                    const int32_t*, G*, float*, const AttentionDims&, const SmemLimits&,           \
                                    DeviceAllocator&, cudaStream_t);                                               \
  template void attention_bwd<T, G>(const T*, const T*, const T*, const T*, const float*, const T*, const int32_t*, \
                                    const int32_t*, const int32_t*, const int32_t*, G*, G*, G*, const AttentionDims&, \
                                    const SmemLimits&, DeviceAllocator&, cudaStream_t);
TRLHPC_INSTANTIATE_ATTENTION(float, float)
TRLHPC_INSTANTIATE_ATTENTION(bf16, bf16)
TRLHPC_INSTANTIATE_ATTENTION(bf16, float)  // bf16 inputs, fp32 accumulators (ring attention)
template void attention_merge<float>(float*, float*, const float*, const float*, int64_t, int64_t, int, int,
                                     cudaStream_t);
template void attention_merge<bf16>(bf16*, float*, const bf16*, const float*, int64_t, int64_t, int, int, cudaStream_t);
#undef TRLHPC_INSTANTIATE_ATTENTION

}  // namespace trlhpc::cuda
