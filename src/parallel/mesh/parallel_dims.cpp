#include "trlhpc/parallel/mesh/parallel_dims.hpp"

#include <algorithm>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

namespace {
std::string product_string(const ParallelDims& d) {
  return "dp_replicate_size " + std::to_string(d.dp_replicate) + " x dp_shard_size " + std::to_string(d.dp_shard) +
         " x cp_size " + std::to_string(d.cp) + " x sp_size " + std::to_string(d.sp) + " x tp_size " +
         std::to_string(d.tp);
}

void require_positive(const char* flag, int value) {
  TRLHPC_REQUIRE(value >= 1, std::string(flag) + " must be a positive integer (got " + std::to_string(value) + ")");
}
}  // namespace

ParallelDims ParallelDims::resolved(int world_size) const {
  TRLHPC_ASSERT(world_size >= 1, "world size must be positive");
  require_positive("--dp_replicate_size", dp_replicate);
  require_positive("--cp_size", cp);
  require_positive("--sp_size", sp);
  require_positive("--tp_size", tp);
  TRLHPC_REQUIRE(dp_shard >= 1 || dp_shard == -1,
                 "--dp_shard_size must be a positive integer or -1 to use the remaining ranks (got " +
                     std::to_string(dp_shard) + ")");
  ParallelDims out = *this;
  const int64_t others = int64_t{dp_replicate} * cp * sp * tp;
  if (dp_shard == -1) {
    TRLHPC_REQUIRE(world_size % others == 0,
                   "cannot infer --dp_shard_size: the world size " + std::to_string(world_size) +
                       " is not divisible by dp_replicate_size " + std::to_string(dp_replicate) + " x cp_size " +
                       std::to_string(cp) + " x sp_size " + std::to_string(sp) + " x tp_size " + std::to_string(tp) +
                       " = " + std::to_string(others) + "; launch a multiple of " + std::to_string(others) +
                       " ranks or change the sizes");
    out.dp_shard = static_cast<int>(world_size / others);
  }
  const int64_t product = out.world_size();
  TRLHPC_REQUIRE(product == world_size,
                 "parallel sizes " + product_string(out) + " = " + std::to_string(product) +
                     " do not match the world size " + std::to_string(world_size) +
                     " (ranks launched); make the product " + std::to_string(world_size) +
                     " or pass --dp_shard_size -1 to infer dp_shard");
  return out;
}

ParallelDims ParallelDims::for_model(int num_heads, int num_kv_heads) const {
  validate_model(num_heads, num_kv_heads);
  ParallelDims out = *this;
  out.kv_share = tp > num_kv_heads ? tp / num_kv_heads : 1;
  return out;
}

void ParallelDims::validate_model(int num_heads, int num_kv_heads) const {
  TRLHPC_REQUIRE(num_heads >= 1 && num_kv_heads >= 1 && num_heads % num_kv_heads == 0,
                 "num_attention_heads " + std::to_string(num_heads) + " and num_key_value_heads " +
                     std::to_string(num_kv_heads) + " must be positive, the first a multiple of the second");
  TRLHPC_REQUIRE(num_heads % tp == 0, "num_attention_heads " + std::to_string(num_heads) +
                                          " is not divisible by tp_size " + std::to_string(tp) +
                                          "; choose a tp_size that divides it");
  TRLHPC_REQUIRE(num_kv_heads % tp == 0 || tp % num_kv_heads == 0,
                 "num_key_value_heads " + std::to_string(num_kv_heads) + " and tp_size " + std::to_string(tp) +
                     " do not divide one another (kv heads are split over tp ranks, or each is replicated on "
                     "tp_size / num_key_value_heads ranks); choose a tp_size that divides " +
                     std::to_string(num_kv_heads) + " or is a multiple of it");
  // tp > KVH: every tp rank holds one (replicated) kv head.
  const int local_heads = num_heads / tp, local_kv_heads = std::max(1, num_kv_heads / tp);
  TRLHPC_REQUIRE(local_heads % sp == 0,
                 "num_attention_heads " + std::to_string(num_heads) + " / tp_size " + std::to_string(tp) + " = " +
                     std::to_string(local_heads) + " heads per tp rank is not divisible by sp_size " +
                     std::to_string(sp) + " (Ulysses gives each sp rank whole heads); choose an sp_size that divides " +
                     std::to_string(local_heads));
  TRLHPC_REQUIRE(local_kv_heads % sp == 0 || sp % local_kv_heads == 0,
                 "num_key_value_heads " + std::to_string(num_kv_heads) + " / tp_size " + std::to_string(tp) + " = " +
                     std::to_string(local_kv_heads) + " kv heads per tp rank neither divides nor is divisible by sp_size " +
                     std::to_string(sp) + "; choose another sp_size");
}

int64_t ParallelDims::sequence_multiple() const {
  return (cp > 1 ? 2 * int64_t{cp} : 1) * sp * (tp_sequence_parallel ? tp : 1);
}

void ParallelDims::validate_sequence(int64_t max_length, int64_t pad_to_multiple_of) const {
  const int64_t multiple = sequence_multiple();
  std::string why = "(";
  if (cp > 1) why += "2 x cp_size " + std::to_string(cp) + " x ";
  why += "sp_size " + std::to_string(sp);
  if (tp_sequence_parallel) why += " x tp_size " + std::to_string(tp);
  why += " = " + std::to_string(multiple) + ": cp splits a sequence into 2*cp zigzag chunks, sp into sp equal chunks";
  if (tp_sequence_parallel) why += ", --tp_sequence_parallel each rank's part into tp";
  why += ")";
  TRLHPC_REQUIRE(max_length > 0, "--max_length must be positive (got " + std::to_string(max_length) + ")");
  TRLHPC_REQUIRE(max_length % multiple == 0,
                 "--max_length " + std::to_string(max_length) + " is not a multiple of " + std::to_string(multiple) +
                     " " + why + "; use --max_length " + std::to_string((max_length / multiple + 1) * multiple));
  TRLHPC_REQUIRE(pad_to_multiple_of <= 0 || pad_to_multiple_of % multiple == 0,
                 "--pad_to_multiple_of " + std::to_string(pad_to_multiple_of) + " is not a multiple of " +
                     std::to_string(multiple) + " " + why + "; use --pad_to_multiple_of " +
                     std::to_string((pad_to_multiple_of / multiple + 1) * multiple));
}

int64_t ParallelDims::world_size() const { return int64_t{dp_replicate} * dp_shard * cp * sp * tp; }

std::string ParallelDims::to_string() const {
  return "dp_replicate " + std::to_string(dp_replicate) + " x dp_shard " + std::to_string(dp_shard) + " x cp " +
         std::to_string(cp) + " x sp " + std::to_string(sp) + " x tp " + std::to_string(tp) +
         (tp_sequence_parallel && tp > 1 ? " (sequence parallel)" : "");
}

}  // namespace trlhpc
