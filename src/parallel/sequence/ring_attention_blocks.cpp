// Chunk-pair planning for ring attention; the rule is in ring_attention_blocks.hpp.
#include "src/parallel/sequence/ring_attention_blocks.hpp"

#include <algorithm>

namespace trlhpc::ring {

std::vector<ChunkSummary> summarize_chunks(const int32_t* pos, const int32_t* doc, int64_t B, int64_t Tl) {
  const int64_t Tc = Tl / 2;
  std::vector<ChunkSummary> out(static_cast<size_t>(B * 2));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < 2; ++c) {
      ChunkSummary& spans = out[static_cast<size_t>(b * 2 + c)];
      // Runs of equal doc id first (documents are contiguous in collated rows), then merge repeats.
      for (int64_t t = b * Tl + c * Tc; t < b * Tl + (c + 1) * Tc; ++t) {
        if (spans.empty() || spans.back().doc != doc[t])
          spans.push_back(DocSpan{doc[t], pos[t], pos[t]});
        else
          spans.back().pos_min = std::min(spans.back().pos_min, pos[t]),
          spans.back().pos_max = std::max(spans.back().pos_max, pos[t]);
      }
      std::sort(spans.begin(), spans.end(), [](const DocSpan& x, const DocSpan& y) { return x.doc < y.doc; });
      size_t w = 0;
      for (size_t i = 0; i < spans.size(); ++i) {
        if (w > 0 && spans[w - 1].doc == spans[i].doc) {
          spans[w - 1].pos_min = std::min(spans[w - 1].pos_min, spans[i].pos_min);
          spans[w - 1].pos_max = std::max(spans[w - 1].pos_max, spans[i].pos_max);
        } else {
          spans[w++] = spans[i];
        }
      }
      spans.resize(w);
    }
  return out;
}

bool chunk_pair_allowed(const ChunkSummary& q, const ChunkSummary& k, int64_t window) {
  size_t i = 0, j = 0;
  while (i < q.size() && j < k.size()) {
    if (q[i].doc < k[j].doc) {
      ++i;
    } else if (k[j].doc < q[i].doc) {
      ++j;
    } else {
      const bool in_window = window <= 0 || int64_t{q[i].pos_min} - k[j].pos_max < window;
      if (k[j].pos_min <= q[i].pos_max && in_window) return true;
      ++i, ++j;
    }
  }
  return false;
}

BlockPlan plan_block(const std::vector<ChunkSummary>& q, const std::vector<ChunkSummary>& k, int64_t B,
                     bool cover_every_query_chunk, int64_t window) {
  BlockPlan plan;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t qc = 0; qc < 2; ++qc) {
      const ChunkSummary& qs = q[static_cast<size_t>(b * 2 + qc)];
      const bool need0 = chunk_pair_allowed(qs, k[static_cast<size_t>(b * 2)], window);
      const bool need1 = chunk_pair_allowed(qs, k[static_cast<size_t>(b * 2 + 1)], window);
      plan.pairs += 2;
      if (need0 && need1) {
        plan.items.push_back({b, qc, 0, 2});
      } else if (need0 || need1) {
        plan.items.push_back({b, qc, need0 ? 0 : 1, 1});
        plan.pairs_skipped += 1;
      } else if (cover_every_query_chunk) {
        plan.items.push_back({b, qc, 0, 2});
      } else {
        plan.pairs_skipped += 2;
      }
    }
  return plan;
}

}  // namespace trlhpc::ring
