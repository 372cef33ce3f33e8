// cuDNN's fused attention (kernels/cuda/cudnn_attention.hpp) against the hand-written CUDA kernel and the
// CPU primitive: packed causal rows of several documents, GQA, sliding windows, head sizes 64 and 128,
// bf16 inputs with bf16 and F32 outputs; forward (o, lse) and backward (dq, dk, dv accumulate).
// Two GPU backends in one process, one made with CudaOpsOptions::attention = cudnn, the other = kernel
// (what --cuda_attention sets). cudnn_attention_calls() proves the cuDNN one did not silently fall back.
//
// Bounds (normalised L2 error, cuda_test_util.hpp close_normalized): against the CPU fp32 primitive on the
// same bf16-rounded inputs, kBf16Tolerance for o and the gradients (the kernel's bound: bf16 rounding of
// o, P and dS); lse within 1e-4 (it is fp32 in both); against the hand-written kernel twice kBf16Tolerance
// for the gradients (cuDNN rounds dq/dk/dv to bf16 once more before the fp32 accumulation).
// Skips visibly without a GPU, and also (with the reason printed) where the build has no cudnn-frontend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

struct Case {
  int64_t B, T, NH, KVH, HS, window;
  int max_doc;  // documents of 1..max_doc tokens, positions restarting at 0
};

void make_ids(const Case& c, uint64_t seed, std::vector<int32_t>& pos, std::vector<int32_t>& doc) {
  pos.assign(static_cast<size_t>(c.B * c.T), 0), doc.assign(pos.size(), 0);
  std::mt19937 gen(static_cast<uint32_t>(seed));
  for (int64_t b = 0; b < c.B; ++b) {
    int32_t d = 0, p = 0;
    int left = 1 + static_cast<int>(gen() % c.max_doc);
    for (int64_t t = 0; t < c.T; ++t) {
      if (left-- == 0) ++d, p = 0, left = static_cast<int>(gen() % c.max_doc);
      doc[b * c.T + t] = d, pos[b * c.T + t] = p++;
    }
  }
}

// A backend that routes attention as --cuda_attention `choice` does.
std::unique_ptr<CudaOps> backend_with(const char* choice) {
  CudaOpsOptions options;
  options.attention = kernels::parse_attention_preference(choice);
  return make_cuda_backend(0, options);
}

void check_case(const Case& c, DType out_dtype, uint64_t seed) {
  std::unique_ptr<Ops> cpu = make_cpu_ops();
  std::unique_ptr<CudaOps> cudnn = backend_with("cudnn"), kernel = backend_with("kernel");
  const AttentionShape s{c.B, c.T, c.T, c.NH, c.KVH, c.HS, static_cast<float>(1.0 / std::sqrt(double(c.HS))), c.window};
  std::vector<int32_t> pos, doc;
  make_ids(c, seed, pos, doc);
  const int64_t nq = c.B * c.T * c.NH * c.HS, nk = c.B * c.T * c.KVH * c.HS, nl = c.B * c.NH * c.T;
  const std::vector<float> q = round_bf16(random_floats(nq, seed + 1, 1.5f)), k = round_bf16(random_floats(nk, seed + 2, 1.5f));
  const std::vector<float> v = round_bf16(random_floats(nk, seed + 3)), dout = round_bf16(random_floats(nq, seed + 4));
  const std::string where = "B " + std::to_string(c.B) + " T " + std::to_string(c.T) + " heads " + std::to_string(c.NH) +
                            "/" + std::to_string(c.KVH) + " HS " + std::to_string(c.HS) + " window " +
                            std::to_string(c.window) + " out " + dtype_name(out_dtype);

  struct Result {
    std::vector<float> o, lse, dq, dk, dv;
  };
  auto run = [&](Ops& ops, DType in) {
    const Tensor tq = upload(ops, q, {nq}, in), tk = upload(ops, k, {nk}, in), tv = upload(ops, v, {nk}, in);
    const Tensor tpos = upload_i32(ops, pos, {c.B * c.T}), tdoc = upload_i32(ops, doc, {c.B * c.T});
    const DType out = in == DType::F32 ? DType::F32 : out_dtype;
    Tensor o = poisoned(ops, {nq}, out), lse = poisoned(ops, {nl});
    ops.attention_fwd(tq, tk, tv, tpos, tpos, tdoc, tdoc, o, lse, s);
    Result r{download(ops, o), download(ops, lse), {}, {}, {}};
    // The backward reads o in the inputs' dtype (an F32 o is a ring accumulator; not this path).
    const Tensor o_in = out == in ? o : upload(ops, round_bf16(r.o), {nq}, in);
    // Non-zero starting gradients: the backward must add to them.
    const Tensor dq = upload(ops, std::vector<float>(nq, 0.25f), {nq}, out);
    const Tensor dk = upload(ops, std::vector<float>(nk, 0.25f), {nk}, out);
    const Tensor dv = upload(ops, std::vector<float>(nk, 0.25f), {nk}, out);
    ops.attention_bwd(tq, tk, tv, o_in, lse, upload(ops, dout, {nq}, in), tpos, tpos, tdoc, tdoc, dq, dk, dv, s);
    r.dq = download(ops, dq), r.dk = download(ops, dk), r.dv = download(ops, dv);
    return r;
  };
  const Result want = run(*cpu, DType::F32);
  const Result via_kernel = run(*kernel, DType::BF16);
  const int64_t before = cudnn->cudnn_attention_calls();
  const Result via_cudnn = run(*cudnn, DType::BF16);
  ASSERT_EQ(cudnn->cudnn_attention_calls() - before, 2) << "cuDNN did not take fwd + bwd (see stderr), " << where;
  EXPECT_EQ(kernel->cudnn_attention_calls(), 0);

  EXPECT_TRUE(close_normalized(via_cudnn.o, want.o, kBf16Tolerance)) << "o vs CPU, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.lse, want.lse, 1e-4)) << "lse vs CPU, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.o, via_kernel.o, kBf16Tolerance)) << "o vs kernel, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.lse, via_kernel.lse, 1e-4)) << "lse vs kernel, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dq, want.dq, kBf16Tolerance)) << "dq vs CPU, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dk, want.dk, kBf16Tolerance)) << "dk vs CPU, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dv, want.dv, kBf16Tolerance)) << "dv vs CPU, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dq, via_kernel.dq, 2 * kBf16Tolerance)) << "dq vs kernel, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dk, via_kernel.dk, 2 * kBf16Tolerance)) << "dk vs kernel, " << where;
  EXPECT_TRUE(close_normalized(via_cudnn.dv, via_kernel.dv, 2 * kBf16Tolerance)) << "dv vs kernel, " << where;
}

TEST(CudaAttentionCudnn, MatchesKernelAndCpu) {
  TRLHPC_REQUIRE_GPU();
  uint64_t seed = 100;
  const std::vector<Case> cases = {
      {1, 256, 4, 4, 64, 0, 256},     // one document per row: plain causal
      {2, 300, 6, 2, 64, 0, 50},      // packed documents, GQA 3:1, T not a multiple of 64
      {3, 512, 8, 2, 128, 0, 200},    // head size 128, a sequence count that is not a power of two
      {2, 300, 4, 2, 64, 37, 120},    // sliding window shorter than the documents
      {1, 1024, 2, 1, 64, 129, 700},  // window across tiles, GQA 2:1
  };
  for (const Case& c : cases)
    for (DType out : {DType::BF16, DType::F32}) check_case(c, out, seed += 10);
}

TEST(CudaAttentionCudnn, IneligibleCallsUseTheKernel) {
  TRLHPC_REQUIRE_GPU();
  std::unique_ptr<CudaOps> gpu = backend_with("cudnn");
  // fp32 inputs: cuDNN's fused SDPA has no fp32 path, so the kernel runs.
  const int64_t T = 64, HS = 64;
  std::vector<int32_t> pos(T), doc(T, 0);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t);
  const Tensor q = upload(*gpu, random_floats(T * HS, 1), {T * HS});
  const Tensor tpos = upload_i32(*gpu, pos, {T}), tdoc = upload_i32(*gpu, doc, {T});
  Tensor o = poisoned(*gpu, {T * HS}), lse = poisoned(*gpu, {T});
  gpu->attention_fwd(q, q, q, tpos, tpos, tdoc, tdoc, o, lse, AttentionShape{1, T, T, 1, 1, HS, 0.125f, 0});
  EXPECT_EQ(gpu->cudnn_attention_calls(), 0);
  // A document interrupted and resumed in one row: not expressible, the kernel runs.
  const Tensor qb = upload(*gpu, random_floats(T * HS, 2), {T * HS}, DType::BF16);
  std::vector<int32_t> split(T, 0);
  for (int64_t t = 16; t < 32; ++t) split[t] = 1;
  Tensor ob = poisoned(*gpu, {T * HS}, DType::BF16);
  gpu->attention_fwd(qb, qb, qb, tpos, tpos, upload_i32(*gpu, split, {T}), upload_i32(*gpu, split, {T}), ob, lse,
                     AttentionShape{1, T, T, 1, 1, HS, 0.125f, 0});
  EXPECT_EQ(gpu->cudnn_attention_calls(), 0);
}

}  // namespace
}  // namespace trlhpc::cuda_test
