// CUDA embedding against the CPU backend: a vocab slice (ids outside it give zero rows and no
// gradient), frequent repeated ids (the sorted-run backward), fp32/bf16 tables and gradients; the
// fp32 backward adds in the CPU's order, so it is bitwise equal to the CPU and reproducible.
#include <gtest/gtest.h>

#include <random>

#include "cuda_test_util.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

std::vector<int32_t> random_ids(int64_t N, int32_t max_id, uint64_t seed) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> any(0, max_id - 1), hot(0, 3);
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (auto& id : ids) id = gen() % 4 == 0 ? hot(gen) : any(gen);  // a quarter of the tokens hit 4 ids
  return ids;
}

TEST(CudaEmbedding, ForwardMatchesCpuOnAVocabSlice) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t N = 517, C = 37, V = 300, vocab_start = 100;  // the slice [100, 400) of a 500-token vocabulary
  const Pair ids = both_i32(be, random_ids(N, 500, 1), {N});
  for (auto [table_dtype, out_dtype] : {std::pair{DType::F32, DType::F32}, {DType::F32, DType::BF16},
                                        {DType::BF16, DType::BF16}, {DType::BF16, DType::F32}}) {
    const Pair table = both(be, random_floats(static_cast<size_t>(V * C), 2), {V, C}, table_dtype);
    const Pair out = both_poisoned(be, {N, C}, out_dtype);
    be.cpu->embedding_fwd(ids.cpu, table.cpu, out.cpu, vocab_start);
    be.gpu->embedding_fwd(ids.gpu, table.gpu, out.gpu, vocab_start);
    // A bf16 -> bf16 or fp32 -> fp32 lookup copies values exactly; fp32 -> bf16 rounds once.
    EXPECT_TRUE(matches(be, out, out_dtype == table_dtype ? 0.0 : kBf16Tolerance));
  }
}

TEST(CudaEmbedding, BackwardIsDeterministicAndMatchesCpu) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  for (auto [N, V, vocab_start] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 0}, {4096, 1000, 0}, {3001, 300, 100}}) {
    const int64_t C = 53;
    const Pair ids = both_i32(be, random_ids(N, static_cast<int32_t>(V + vocab_start + 50), 3), {N});
    const std::vector<float> table0 = random_floats(static_cast<size_t>(V * C), 4);  // dtable accumulates
    const Pair dout = both(be, random_floats(static_cast<size_t>(N * C), 5), {N, C});
    const Pair dtable = both(be, table0, {V, C});
    be.cpu->embedding_bwd(ids.cpu, dout.cpu, dtable.cpu, vocab_start);
    be.gpu->embedding_bwd(ids.gpu, dout.gpu, dtable.gpu, vocab_start);
    EXPECT_TRUE(matches(be, dtable, 0.0)) << "fp32 backward must add in the CPU's order, N " << N;
    Tensor again = upload(*be.gpu, table0, {V, C});
    be.gpu->embedding_bwd(ids.gpu, dout.gpu, again, vocab_start);
    EXPECT_TRUE(close_normalized(download(*be.gpu, again), download(*be.gpu, dtable.gpu), 0.0)) << "not reproducible";

    const Pair dout_bf16 = both(be, random_floats(static_cast<size_t>(N * C), 6), {N, C}, DType::BF16);
    const Pair dtable2 = both(be, table0, {V, C});
    be.cpu->embedding_bwd(ids.cpu, dout_bf16.cpu, dtable2.cpu, vocab_start);
    be.gpu->embedding_bwd(ids.gpu, dout_bf16.gpu, dtable2.gpu, vocab_start);
    EXPECT_TRUE(matches(be, dtable2, 1e-6)) << "bf16 dout, N " << N;
  }
}

}  // namespace
}  // namespace trlhpc::cuda_test
