// Packing (bfd, bfd_split, wrapped), truncation and collation into Batch.
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/packing.hpp"

namespace trlhpc::batching {
namespace {

using dataset::TokenizedExample;
using Ids = std::vector<int32_t>;

// Token values of each row, read through its segments.
std::vector<Ids> row_tokens(const std::vector<PackedRow>& rows, const std::vector<Ids>& examples) {
  std::vector<Ids> out;
  for (const auto& row : rows) {
    Ids ids;
    for (const auto& s : row.segments)
      for (int32_t k = 0; k < s.length; ++k) ids.push_back(examples[s.example][s.start + k]);
    out.push_back(ids);
  }
  return out;
}

std::vector<std::vector<int32_t>> seq_lengths(const std::vector<PackedRow>& rows) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& row : rows) {
    out.emplace_back();
    for (const auto& s : row.segments) out.back().push_back(s.length);
  }
  return out;
}

std::vector<int32_t> lengths_of(const std::vector<Ids>& examples) {
  std::vector<int32_t> lengths;
  for (const auto& e : examples) lengths.push_back(static_cast<int32_t>(e.size()));
  return lengths;
}

std::vector<int32_t> random_lengths(size_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> lengths(n);
  for (auto& l : lengths) l = dist(gen);
  return lengths;
}

// How many times each (example, token) is covered by the rows.
std::map<std::pair<int64_t, int32_t>, int> coverage(const std::vector<PackedRow>& rows) {
  std::map<std::pair<int64_t, int32_t>, int> seen;
  for (const auto& row : rows)
    for (const auto& s : row.segments)
      for (int32_t k = 0; k < s.length; ++k) ++seen[{s.example, s.start + k}];
  return seen;
}

// TRL's own docstring examples (trl/data_utils.py pack_dataset), seq_length = 4.
TEST(Packing, MatchesTrlDocstringExamples) {
  std::vector<Ids> examples = {{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10}, {11}};
  PackingOptions options{.max_length = 4};
  auto bfd = pack_bfd(lengths_of(examples), options);
  EXPECT_EQ(row_tokens(bfd, examples), (std::vector<Ids>{{1, 2, 3, 4}, {8, 9, 10, 11}, {6, 7}}));
  EXPECT_EQ(seq_lengths(bfd), (std::vector<std::vector<int32_t>>{{4}, {3, 1}, {2}}));

  auto split = pack(PackingStrategy::kBfdSplit, lengths_of(examples), options);
  EXPECT_EQ(row_tokens(split, examples), (std::vector<Ids>{{1, 2, 3, 4}, {8, 9, 10, 5}, {6, 7, 11}}));
  EXPECT_EQ(seq_lengths(split), (std::vector<std::vector<int32_t>>{{4}, {3, 1}, {2, 1}}));

  std::vector<Ids> wrapped_examples = {{1, 2, 3}, {4, 5}, {6, 7, 8}, {9}};
  auto wrapped = pack_wrapped(lengths_of(wrapped_examples), options);
  EXPECT_EQ(row_tokens(wrapped, wrapped_examples), (std::vector<Ids>{{1, 2, 3, 4}, {5, 6, 7, 8}, {9}}));
  for (const auto& row : wrapped) EXPECT_TRUE(row.one_document);
}

TEST(Packing, NoTokenLostOrDuplicatedAndRowsFit) {
  const int32_t L = 64;
  auto lengths = random_lengths(3000, 0, 150, 7);
  PackingOptions options{.max_length = L, .map_batch_size = 1000};
  for (auto strategy : {PackingStrategy::kBfd, PackingStrategy::kBfdSplit, PackingStrategy::kWrapped}) {
    auto rows = pack(strategy, lengths, options);
    for (const auto& row : rows) {
      EXPECT_LE(row.length(), L);
      EXPECT_GT(row.length(), 0);
    }
    auto seen = coverage(rows);
    for (size_t e = 0; e < lengths.size(); ++e) {
      // bfd keeps the first max_length tokens (TRL truncates); the others keep every token.
      int32_t kept = strategy == PackingStrategy::kBfd ? std::min(lengths[e], L) : lengths[e];
      for (int32_t k = 0; k < lengths[e]; ++k) {
        auto it = seen.find({static_cast<int64_t>(e), k});
        int count = it == seen.end() ? 0 : it->second;
        ASSERT_EQ(count, k < kept ? 1 : 0) << "example " << e << " token " << k;
      }
    }
    if (strategy != PackingStrategy::kWrapped) {
      for (const auto& row : rows)
        for (const auto& s : row.segments) EXPECT_EQ(s.start % L, 0) << "bfd never splits inside a fragment";
    }
  }
}

// Any-fit property: a bin is opened only when the item fits no earlier bin, so within one map batch any two bins
// hold more than max_length together. Hence bfd bins <= 2*ceil(total/L) - 1, while wrapped uses ceil(total/L).
TEST(Packing, BfdBinsArePairwiseMoreThanFull) {
  const int32_t L = 100;
  auto lengths = random_lengths(1000, 1, 100, 11);
  auto rows = pack_bfd(lengths, {.max_length = L, .map_batch_size = 0});
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j) ASSERT_GT(rows[i].length() + rows[j].length(), L) << i << "," << j;
  int64_t total = 0;
  for (int32_t l : lengths) total += l;
  const int64_t lower = (total + L - 1) / L;
  EXPECT_LE(static_cast<int64_t>(rows.size()), 2 * lower - 1);
  EXPECT_EQ(static_cast<int64_t>(pack_wrapped(lengths, {.max_length = L, .map_batch_size = 0}).size()), lower);
}

// On SFT-like lengths (short against max_length) bfd is within 1% + 1 bin of the wrapped lower bound.
TEST(Packing, BfdIsNearlyAsFullAsWrappedOnShortExamples) {
  const int32_t L = 1024;
  auto lengths = random_lengths(20000, 20, 400, 3);
  int64_t total = 0;
  for (int32_t l : lengths) total += l;
  const int64_t lower = (total + L - 1) / L;
  auto rows = pack_bfd(lengths, {.max_length = L, .map_batch_size = 0});
  EXPECT_LE(static_cast<double>(rows.size()), 1.01 * static_cast<double>(lower) + 1) << "lower bound " << lower;
}

// Fewest bins by exhaustive search (items sorted decreasing, symmetric placements pruned).
int optimal_bins(std::vector<int32_t> items, int32_t capacity) {
  std::sort(items.rbegin(), items.rend());
  int best = static_cast<int>(items.size());
  std::vector<int32_t> loads;
  std::function<void(size_t)> place = [&](size_t i) {
    if (static_cast<int>(loads.size()) >= best) return;
    if (i == items.size()) {
      best = static_cast<int>(loads.size());
      return;
    }
    for (size_t b = 0; b < loads.size(); ++b) {
      if (loads[b] + items[i] > capacity) continue;
      loads[b] += items[i];
      place(i + 1);
      loads[b] -= items[i];
    }
    loads.push_back(items[i]);
    place(i + 1);
    loads.pop_back();
  };
  place(0);
  return best;
}

// Best-fit decreasing guarantee (Johnson 1973; tight form of Dósa 2007 for the decreasing any-fit rules):
// bins <= 11/9 OPT + 6/9. On these tiny inputs that means OPT or OPT + 1.
TEST(Packing, BfdAgainstBruteForceOptimum) {
  std::mt19937_64 gen(5);
  int equal = 0, trials = 400;
  for (int trial = 0; trial < trials; ++trial) {
    const int32_t L = std::uniform_int_distribution<int32_t>(5, 20)(gen);
    auto lengths = random_lengths(std::uniform_int_distribution<size_t>(1, 8)(gen), 1, L, gen());
    int opt = optimal_bins(lengths, L);
    int bfd = static_cast<int>(pack_bfd(lengths, {.max_length = L}).size());
    ASSERT_GE(bfd, opt);
    ASSERT_LE(9 * bfd, 11 * opt + 6) << "L " << L << " n " << lengths.size();
    equal += bfd == opt;
  }
  EXPECT_GT(equal, trials * 9 / 10);
}

TEST(Packing, MapBatchesArePackedIndependently) {
  auto lengths = random_lengths(2500, 1, 90, 13);
  PackingOptions batched{.max_length = 100, .map_batch_size = 1000};
  auto rows = pack_bfd(lengths, batched);
  std::vector<PackedRow> expected;
  for (int64_t begin = 0; begin < 2500; begin += 1000) {
    std::vector<int64_t> order;
    for (int64_t i = begin; i < std::min<int64_t>(2500, begin + 1000); ++i) order.push_back(i);
    auto part = pack_bfd(lengths, {.max_length = 100, .map_batch_size = 0}, order);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r].segments, expected[r].segments) << r;
  auto wrapped = pack_wrapped(lengths, batched);
  int short_rows = 0;
  for (const auto& row : wrapped) short_rows += row.length() < 100;
  EXPECT_EQ(short_rows, 3);  // the tail of each map batch
}

TEST(Packing, OrderNamesOriginalExamples) {
  std::vector<int32_t> lengths = {3, 1, 2};
  std::vector<int64_t> order = {2, 0};
  auto rows = pack_wrapped(lengths, {.max_length = 4}, order);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].segments, (std::vector<PackedSegment>{{2, 0, 2}, {0, 0, 2}}));
  EXPECT_EQ(rows[1].segments, (std::vector<PackedSegment>{{0, 2, 1}}));
}

TEST(Packing, TruncationAndUnpackedRows) {
  TokenizedExample e{{1, 2, 3, 4, 5}, {0, 1, 0, 1, 1}};
  auto start = e, end = e;
  truncate_example(start, 3, TruncationMode::kKeepStart);
  truncate_example(end, 3, TruncationMode::kKeepEnd);
  EXPECT_EQ(start.input_ids, (Ids{1, 2, 3}));
  EXPECT_EQ(start.loss_mask, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(end.input_ids, (Ids{3, 4, 5}));
  EXPECT_EQ(end.loss_mask, (std::vector<uint8_t>{0, 1, 1}));
  auto rows = unpacked_rows({5, 2}, 3, TruncationMode::kKeepEnd);
  EXPECT_EQ(rows[0].segments, (std::vector<PackedSegment>{{0, 2, 3}}));
  EXPECT_EQ(rows[1].segments, (std::vector<PackedSegment>{{1, 0, 2}}));
  EXPECT_THROW(parse_packing_strategy("first_fit"), UserError);
  EXPECT_EQ(parse_packing_strategy("wrapped"), PackingStrategy::kWrapped);
  EXPECT_THROW(pack_bfd({1}, {.max_length = 0}), UserError);
}

// The worked example of packing_collate.cpp.
TEST(Collate, PackedRowsPositionsDocsAndShiftedTargets) {
  std::vector<TokenizedExample> examples = {
      {{11, 12, 13}, {0, 1, 1}},  // A
      {{21, 22}, {1, 1}},         // B
      {{31, 32}, {0, 1}},         // C
  };
  std::vector<PackedRow> rows = {{{{0, 0, 3}, {1, 0, 2}}}, {{{2, 0, 2}}}};
  std::vector<int64_t> pick = {0, 1};
  Batch b = collate(examples, rows, pick, {.pad_to_multiple_of = 4, .pad_token_id = 0});
  ASSERT_EQ(b.rows, 2);
  ASSERT_EQ(b.seq_len, 8);
  const int32_t I = kIgnoreIndex, P = kPaddingDocId;
  EXPECT_EQ(b.input_ids, (Ids{11, 12, 13, 21, 22, 0, 0, 0, 31, 32, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.positions, (Ids{0, 1, 2, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.doc_ids, (Ids{0, 0, 0, 1, 1, P, P, P, 0, 0, P, P, P, P, P, P}));
  EXPECT_EQ(b.targets, (Ids{12, 13, I, 22, I, I, I, I, 32, I, I, I, I, I, I, I}));
  EXPECT_EQ(b.target_tokens(), 4);

  // padding_free: one row, documents numbered along it, same targets, rounded to 4.
  Batch flat = collate(examples, rows, pick, {.padding_free = true, .pad_to_multiple_of = 4, .pad_token_id = 9});
  ASSERT_EQ(flat.rows, 1);
  ASSERT_EQ(flat.seq_len, 8);
  EXPECT_EQ(flat.input_ids, (Ids{11, 12, 13, 21, 22, 31, 32, 9}));
  EXPECT_EQ(flat.positions, (Ids{0, 1, 2, 0, 1, 0, 1, 0}));
  EXPECT_EQ(flat.doc_ids, (Ids{0, 0, 0, 1, 1, 2, 2, P}));
  EXPECT_EQ(flat.targets, (Ids{12, 13, I, 22, I, 32, I, I}));

  Batch fixed = collate(examples, rows, pick, {.pad_to_length = 6});
  EXPECT_EQ(fixed.seq_len, 6);
  EXPECT_EQ(collate(examples, rows, std::vector<int64_t>{}, {}).rows, 0);
}

// A wrapped row is one sequence: positions run over the row and targets cross the document boundary inside it.
TEST(Collate, WrappedRowIsOneSequence) {
  std::vector<TokenizedExample> examples = {{{1, 2, 3}, {1, 1, 1}}, {{4, 5}, {1, 0}}};
  auto rows = pack_wrapped({3, 2}, {.max_length = 4});
  std::vector<int64_t> pick = {0, 1};
  Batch b = collate(examples, rows, pick, {});
  ASSERT_EQ(b.seq_len, 4);
  const int32_t I = kIgnoreIndex, P = kPaddingDocId;
  EXPECT_EQ(b.input_ids, (Ids{1, 2, 3, 4, 5, 0, 0, 0}));
  EXPECT_EQ(b.positions, (Ids{0, 1, 2, 3, 0, 0, 0, 0}));
  EXPECT_EQ(b.doc_ids, (Ids{0, 0, 0, 0, 0, P, P, P}));
  EXPECT_EQ(b.targets, (Ids{2, 3, 4, I, I, I, I, I}));  // 4 -> 5 is cut by the row end; 5 is masked anyway
}

// Random packings: every target is the next token of the same document with a set mask, and every such pair is a
// target; positions count from 0 within each document; no document id repeats within a row.
TEST(Collate, TargetsNeverCrossDocumentsAndHonourMasks) {
  std::mt19937_64 gen(17);
  std::vector<TokenizedExample> examples(300);
  for (auto& e : examples) {
    int32_t n = std::uniform_int_distribution<int32_t>(0, 90)(gen);
    for (int32_t k = 0; k < n; ++k) {
      e.input_ids.push_back(static_cast<int32_t>(gen() % 50000));
      e.loss_mask.push_back(static_cast<uint8_t>(gen() % 3 != 0));
    }
  }
  auto lengths = example_lengths(examples);
  for (auto strategy : {PackingStrategy::kBfd, PackingStrategy::kBfdSplit}) {
    auto rows = pack(strategy, lengths, {.max_length = 64, .map_batch_size = 100});
    std::vector<int64_t> pick;
    for (size_t r = 0; r < rows.size(); r += 3) pick.push_back(static_cast<int64_t>(r));
    for (bool padding_free : {false, true}) {
      Batch b = collate(examples, rows, pick, {.padding_free = padding_free, .pad_to_multiple_of = 8});
      ASSERT_EQ(b.seq_len % 8, 0);
      // Expected tokens and targets of each picked row, segment by segment (each its own document).
      std::vector<Ids> want_ids, want_targets;
      for (int64_t r : pick) {
        want_ids.emplace_back();
        want_targets.emplace_back();
        for (const auto& s : rows[r].segments) {
          const auto& e = examples[s.example];
          for (int32_t k = 0; k < s.length; ++k) {
            want_ids.back().push_back(e.input_ids[s.start + k]);
            bool trained = k + 1 < s.length && e.loss_mask[s.start + k + 1];
            want_targets.back().push_back(trained ? e.input_ids[s.start + k + 1] : kIgnoreIndex);
          }
        }
      }
      if (padding_free) {  // all rows back to back in one row
        for (size_t i = 1; i < want_ids.size(); ++i) {
          want_ids[0].insert(want_ids[0].end(), want_ids[i].begin(), want_ids[i].end());
          want_targets[0].insert(want_targets[0].end(), want_targets[i].begin(), want_targets[i].end());
        }
        want_ids.resize(1);
        want_targets.resize(1);
      }
      ASSERT_EQ(static_cast<int64_t>(want_ids.size()), b.rows);
      for (int64_t row = 0; row < b.rows; ++row) {
        const int64_t first = row * b.seq_len;
        for (int64_t k = 0; k < b.seq_len; ++k) {
          bool pad = k >= static_cast<int64_t>(want_ids[row].size());
          ASSERT_EQ(b.input_ids[first + k], pad ? 0 : want_ids[row][k]) << "row " << row << " token " << k;
          ASSERT_EQ(b.targets[first + k], pad ? kIgnoreIndex : want_targets[row][k]) << "row " << row << " " << k;
          ASSERT_EQ(b.doc_ids[first + k] == kPaddingDocId, pad);
        }
        std::map<int32_t, int32_t> doc_last_position;
        int32_t previous_doc = 0;
        for (int64_t t = first; t < first + b.seq_len; ++t) {
          int32_t doc = b.doc_ids[t];
          if (doc == kPaddingDocId) continue;
          ASSERT_GE(doc, previous_doc) << "a document id comes back later in the row at " << t;
          previous_doc = doc;
          auto it = doc_last_position.find(doc);
          int32_t want_position = it == doc_last_position.end() ? 0 : it->second + 1;
          ASSERT_EQ(b.positions[t], want_position) << "token " << t;
          doc_last_position[doc] = want_position;
          if (b.targets[t] != kIgnoreIndex) {
            ASSERT_EQ(b.doc_ids[t + 1], doc) << "target crosses documents at " << t;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace trlhpc::batching
