#pragma once
// Which (query chunk, key chunk) pairs of a ring step need computing (ring_attention.hpp).
//
// A pair has an allowed (q, k) iff some document d occurs on both sides with
//   min { pos_k : doc_k = d } <= max { pos_q : doc_q = d }   and, with a sliding window W,
//   min { pos_q : doc_q = d } - max { pos_k : doc_k = d } < W
// (the mask is doc_q == doc_k && pos_q >= pos_k && pos_q - pos_k < W; a document's positions in a
// chunk are consecutive, so both range tests together are exact). A pair entirely outside the window
// is skipped like a pair entirely in the future: not computed, its K/V still travel the ring.
// Summarising each chunk as its documents' position
// ranges makes the test exact and O(chunk) per chunk, whatever the packing: documents crossing chunk
// boundaries, odd lengths, padding (doc id -1 is just another document). Per-tile range tests inside
// the primitive still skip masked tiles of a computed pair.
#include <cstdint>
#include <vector>

namespace trlhpc::ring {

struct DocSpan {
  int32_t doc, pos_min, pos_max;
};
using ChunkSummary = std::vector<DocSpan>;  // sorted by doc, one entry per document in the chunk

// Summaries of the 2 local chunks of every row of pos, doc (B, Tl): (B, 2), index row * 2 + chunk.
std::vector<ChunkSummary> summarize_chunks(const int32_t* pos, const int32_t* doc, int64_t B, int64_t Tl);

// window: AttentionShape::window (0 = none).
bool chunk_pair_allowed(const ChunkSummary& q, const ChunkSummary& k, int64_t window);

// One call of the attention primitive: query chunk `q_chunk` of row `row` against key chunks
// [k_first, k_first + k_count) of the block (k_count 1 or 2: both chunks are adjacent in the block).
struct BlockItem {
  int64_t row, q_chunk, k_first, k_count;
};

struct BlockPlan {
  std::vector<BlockItem> items;
  int64_t pairs = 0, pairs_skipped = 0;
};

// The calls for one block. With `cover_every_query_chunk` (the forward's first block, which
// initialises o and lse in place) a query chunk that needs no key chunk still gets a call against
// both, which the primitive answers with o = 0, lse = -inf; such pairs are not counted as skipped.
BlockPlan plan_block(const std::vector<ChunkSummary>& q, const std::vector<ChunkSummary>& k, int64_t B,
                     bool cover_every_query_chunk, int64_t window);

}  // namespace trlhpc::ring
