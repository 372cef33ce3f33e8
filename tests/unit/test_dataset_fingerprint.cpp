// dataset_fingerprint (issue 30 item 6): the identity a checkpoint's dataset must match to resume. The
// counts it replaced (rows, examples, tokens) are equal for the same rows in another order or for
// other tokens of the same lengths; the fingerprint is not. It is a pure function of the prepared rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "trlhpc/data/dataset/fingerprint.hpp"
#include "trlhpc/data/dataset/sft_dataset.hpp"

namespace trlhpc::dataset {
namespace {

TokenizedExample example(std::vector<int32_t> ids) {
  TokenizedExample ex;
  ex.loss_mask.assign(ids.size(), 1);
  ex.loss_mask[0] = 0;
  ex.input_ids = std::move(ids);
  return ex;
}

std::vector<TokenizedExample> examples() {
  return {example({1, 2, 3}), example({4, 5}), example({6, 7, 8, 9}), example({10, 11, 12}), example({13})};
}

SftDataset prepared(std::vector<TokenizedExample> rows, bool packing, uint64_t seed = 42) {
  SftDataOptions o;
  o.max_length = 8;
  o.packing = packing;
  o.seed = seed;
  SftTokenizedExamples tokenized;
  tokenized.examples = std::move(rows);
  tokenized.stats.examples = static_cast<int64_t>(tokenized.examples.size());
  for (const TokenizedExample& ex : tokenized.examples) tokenized.stats.tokens += ex.length();
  return SftDataset::from_examples(o, std::move(tokenized), nullptr);
}

TEST(DatasetFingerprint, SameRowsSameFingerprint) {
  const std::string a = dataset_fingerprint(prepared(examples(), false));
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, dataset_fingerprint(prepared(examples(), false)));
  EXPECT_EQ(dataset_fingerprint(prepared(examples(), true)), dataset_fingerprint(prepared(examples(), true)));
}

TEST(DatasetFingerprint, SameRowsInAnotherOrderDiffer) {
  std::vector<TokenizedExample> reversed = examples();
  std::reverse(reversed.begin(), reversed.end());
  const SftDataset base = prepared(examples(), false), other = prepared(reversed, false);
  ASSERT_EQ(base.num_rows(), other.num_rows());  // what the count-based identity compared
  ASSERT_EQ(base.stats().tokens, other.stats().tokens);
  EXPECT_NE(dataset_fingerprint(base), dataset_fingerprint(other));
  EXPECT_NE(dataset_fingerprint(prepared(examples(), true)), dataset_fingerprint(prepared(reversed, true)));
}

TEST(DatasetFingerprint, OtherTokensOrMasksOfTheSameLengthsDiffer) {
  const std::string base = dataset_fingerprint(prepared(examples(), false));
  std::vector<TokenizedExample> token = examples();
  token[2].input_ids[1] = 70;
  EXPECT_NE(dataset_fingerprint(prepared(token, false)), base);
  std::vector<TokenizedExample> mask = examples();
  mask[2].loss_mask[1] = 0;
  EXPECT_NE(dataset_fingerprint(prepared(mask, false)), base);
  // Moving a token from one example to the next keeps every count but not the framing.
  std::vector<TokenizedExample> framed = examples();
  framed[0] = example({1, 2});
  framed[1] = example({3, 4, 5});
  framed[1].loss_mask = {1, 1, 1};
  framed[0].loss_mask = {0, 1};
  EXPECT_NE(dataset_fingerprint(prepared(framed, false)), base);
}

TEST(DatasetFingerprint, PackingIsPartOfIt) {
  EXPECT_NE(dataset_fingerprint(prepared(examples(), false)), dataset_fingerprint(prepared(examples(), true)));
}

}  // namespace
}  // namespace trlhpc::dataset
