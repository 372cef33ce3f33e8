#pragma once
// One tokenized training example: what the tokenizer + chat template produce for a dataset row, and
// what packing and collation consume.
//
// loss_mask[t] == 1 means token t is a training target: the model is trained to predict it from the
// tokens before it (TRL's `labels[t] != -100`). It is TRL's completion_mask and/or assistant_masks,
// or all ones for plain language modeling. The first token of a document is never predicted (nothing
// precedes it inside the document), whatever its mask says.
#include <cstdint>
#include <vector>

namespace trlhpc::dataset {

struct TokenizedExample {
  std::vector<int32_t> input_ids;  // (L) token ids
  std::vector<uint8_t> loss_mask;  // (L) 1 = token is a training target, 0 = context only

  int32_t length() const { return static_cast<int32_t>(input_ids.size()); }
};

}  // namespace trlhpc::dataset
