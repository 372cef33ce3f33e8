#pragma once
// TpLayout and TpSplit: how tensor parallelism cuts one parameter (ARCHITECTURE.md "Parameters and
// sharding": TP shards first, then the TP-local tensors are flattened into units).
//
// Megatron-LM (Shoeybi et al. 2019, sec. 3) splits a transformer layer's linears in pairs so that one
// all-reduce per block suffices:
//   column-parallel  q/k/v, gate/up: the output dim (rows of the (out, in) weight) is split; each rank
//                    computes its own heads / F-slice. The input passes through Megatron's f operator
//                    (identity forward, all-reduce of the input gradient backward).
//   row-parallel     o_proj, down_proj: the input dim (columns) is split; each rank computes a partial
//                    sum, summed by the g operator (all-reduce forward, identity backward). Their
//                    biases are replicated and added once, after the reduction.
//   vocab-parallel   embedding and LM head: rows of the (V, C) table, rank r owns [r*V/tp, (r+1)*V/tp).
//   replicated       norm weights and the row-parallel biases: every tp rank holds the whole tensor.
//   kv-replicated    k/v (weight rows and biases) when tp > num_key_value_heads (tp % KVH == 0): each
//                    rank holds one kv head, rank r head r / (tp/KVH); the tp/KVH ranks sharing a head
//                    hold the same slice and sum their (partial) gradients of it over that sub-group.
// tp size 1 gives today's full shapes.
namespace trlhpc {

struct TpLayout {
  int size = 1;  // ranks of the tp group
  int rank = 0;  // this rank's index in it
};

enum class TpSplit {
  Replicated,  // whole tensor on every tp rank
  Rows,        // dim 0 split in tp equal blocks (column-parallel linears and their biases, vocab tables)
  Columns,     // dim 1 split in tp equal blocks (row-parallel linear weights)
  KvReplicated,  // dim 0 split in KVH blocks (one kv head each), every block held by tp/KVH ranks:
                 // rank r holds block r / tp_kv_share (ParameterSpec::tp_kv_share = tp/KVH)
};

}  // namespace trlhpc
