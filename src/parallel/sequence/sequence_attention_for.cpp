// include/trlhpc/parallel/sequence/sequence_attention_for.hpp
#include "trlhpc/parallel/sequence/sequence_attention_for.hpp"

#include "trlhpc/parallel/sequence/ring_attention.hpp"
#include "trlhpc/parallel/sequence/ulysses_attention.hpp"

namespace trlhpc {

std::unique_ptr<SequenceAttention> sequence_attention_for(ProcessGroups& groups, DType ulysses_gradient_dtype) {
  const bool ring = groups.cp().size() > 1, ulysses = groups.sp().size() > 1;
  if (ring && ulysses)
    return std::make_unique<UlyssesAttention>(groups.sp().device(), std::make_unique<RingAttention>(groups.cp().device()),
                                              ulysses_gradient_dtype);
  if (ring) return std::make_unique<RingAttention>(groups.cp().device());
  if (ulysses) return std::make_unique<UlyssesAttention>(groups.sp().device(), nullptr, ulysses_gradient_dtype);
  return std::make_unique<LocalAttention>();
}

}  // namespace trlhpc
