#pragma once
// The SequenceAttention of a layout (ARCHITECTURE.md "Sequence parallel"): ring attention over the cp
// group, Ulysses over the sp group, Ulysses with ring attention inside when both are > 1, or
// LocalAttention when cp = sp = 1. Pair it with sequence_shard_for (sequence_shard.hpp); parallelize()
// (train/parallelize.hpp) does both.
#include <memory>

#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {

// The groups must outlive the returned object.
// ulysses_gradient_dtype: UlyssesAttention's gradient_dtype (seq_parallel_communication_data_type).
std::unique_ptr<SequenceAttention> sequence_attention_for(ProcessGroups& groups,
                                                          DType ulysses_gradient_dtype = DType::F32);

}  // namespace trlhpc
