#pragma once
// Letters used in shape comments everywhere in trlhpc:
//   B   sequences (rows) in a micro-batch        T   tokens per row (sequence length)
//   N   tokens in a micro-batch, N = B*T         C   hidden size
//   NH  query heads                              KVH key/value heads (GQA: NH % KVH == 0)
//   HS  head size (head_dim)                     F   MLP intermediate size
//   V   vocabulary size (or the local vocab slice under tensor parallel)
//   L   decoder layers
// Row-major everywhere: (N, C) means C is contiguous. Linear weights follow Hugging Face: (out, in).
