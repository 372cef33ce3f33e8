#pragma once
// Communicator: typed collectives over one process group.
//
// The public API takes std::span<T>; T gives both the datatype and the element count (never a byte
// count). T is one of float, double, int32_t, int64_t, uint8_t, or uint16_t holding bf16 bits.
// Inputs are span<const T> deduced from the output, so vectors and spans of T convert implicitly.
//
// Two implementations: MpiCommunicator (host memory, the CPU backend) and NcclCommunicator (device
// memory). Semantics shared by both, with n = in.size(), P = size(), r = rank():
//   all_reduce          out[i] = op over ranks of in[i]                          (out.size() == n)
//   reduce_scatter      out[i] = sum over ranks of in[r*m + i], m = out.size()   (n == P*m)
//   all_gather          out[s*n + i] = in_s[i]                                   (out.size() == P*n)
//   all_gather_variable out[displ_s + i] = in_s[i], displ_s = sum of counts[<s]  (counts[r] == n)
//   all_to_all          out[s*m + i] = in_s[r*m + i], m = n / P                  (out.size() == n)
//   broadcast           data = data_root
//   send_recv           sends `send` to rank dest while receiving `recv` from rank source (a ring step;
//                       the counts of a pair must match: dest's recv.size() == this send.size())
// Every rank of the group must call the same collectives in the same order (non-blocking ones too).
// Size mismatches are bugs in the caller and throw RuntimeFailure naming both sizes.
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/comm_types.hpp"

namespace trlhpc {

template <class T>
concept CommElement = requires { ElementTypeOf<T>::value; };

class Communicator {
 public:
  template <class T>
  using In = std::span<const std::type_identity_t<T>>;  // not deduced: T comes from the output span

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;           // where the buffers must live
  virtual const char* backend_name() const = 0;  // "mpi", "nccl"
  virtual void barrier() = 0;

  template <CommElement T>
  void all_reduce(In<T> in, std::span<T> out, ReduceOp op = ReduceOp::Sum) {
    check_equal("all_reduce", out.size(), in.size());
    do_all_reduce(in.data(), out.data(), in.size(), ElementTypeOf<T>::value, op, Completion::Blocking).wait();
  }
  template <CommElement T>
  void all_reduce(std::span<T> data, ReduceOp op = ReduceOp::Sum) {  // in place
    do_all_reduce(data.data(), data.data(), data.size(), ElementTypeOf<T>::value, op, Completion::Blocking).wait();
  }
  template <CommElement T>
  void reduce_scatter(In<T> in, std::span<T> out, ReduceOp op = ReduceOp::Sum) {
    check_equal("reduce_scatter input", in.size(), out.size() * group_size());
    do_reduce_scatter(in.data(), out.data(), out.size(), ElementTypeOf<T>::value, op, Completion::Blocking).wait();
  }
  template <CommElement T>
  void all_gather(In<T> in, std::span<T> out) {
    check_equal("all_gather output", out.size(), in.size() * group_size());
    do_all_gather(in.data(), out.data(), in.size(), ElementTypeOf<T>::value, Completion::Blocking).wait();
  }
  template <CommElement T>
  void all_gather_variable(In<T> in, std::span<T> out, std::span<const size_t> counts) {
    check_variable_counts(in.size(), out.size(), counts);
    do_all_gather_variable(in.data(), out.data(), counts.data(), ElementTypeOf<T>::value, Completion::Blocking).wait();
  }
  template <CommElement T>
  void all_to_all(In<T> in, std::span<T> out) {
    check_all_to_all(in.size(), out.size());
    do_all_to_all(in.data(), out.data(), in.size() / group_size(), ElementTypeOf<T>::value, Completion::Blocking).wait();
  }
  template <CommElement T>
  void broadcast(std::span<T> data, int root) {
    check_peer("broadcast root", root);
    do_broadcast(data.data(), data.size(), ElementTypeOf<T>::value, root, Completion::Blocking).wait();
  }
  template <CommElement T>
  void send_recv(In<T> send, int dest, std::span<T> recv, int source) {
    check_peer("send_recv dest", dest);
    check_peer("send_recv source", source);
    do_send_recv(send.data(), send.size(), dest, recv.data(), recv.size(), source, ElementTypeOf<T>::value,
                 Completion::Blocking).wait();
  }

  // Non-blocking variants: same arguments; the returned request must be waited (or tested to true)
  // before the buffers are read, reused or freed.
  template <CommElement T>
  [[nodiscard]] CommRequest all_reduce_async(In<T> in, std::span<T> out, ReduceOp op = ReduceOp::Sum) {
    check_equal("all_reduce", out.size(), in.size());
    return do_all_reduce(in.data(), out.data(), in.size(), ElementTypeOf<T>::value, op, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest all_reduce_async(std::span<T> data, ReduceOp op = ReduceOp::Sum) {
    return do_all_reduce(data.data(), data.data(), data.size(), ElementTypeOf<T>::value, op, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest reduce_scatter_async(In<T> in, std::span<T> out, ReduceOp op = ReduceOp::Sum) {
    check_equal("reduce_scatter input", in.size(), out.size() * group_size());
    return do_reduce_scatter(in.data(), out.data(), out.size(), ElementTypeOf<T>::value, op, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest all_gather_async(In<T> in, std::span<T> out) {
    check_equal("all_gather output", out.size(), in.size() * group_size());
    return do_all_gather(in.data(), out.data(), in.size(), ElementTypeOf<T>::value, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest all_gather_variable_async(In<T> in, std::span<T> out, std::span<const size_t> counts) {
    check_variable_counts(in.size(), out.size(), counts);
    return do_all_gather_variable(in.data(), out.data(), counts.data(), ElementTypeOf<T>::value, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest all_to_all_async(In<T> in, std::span<T> out) {
    check_all_to_all(in.size(), out.size());
    return do_all_to_all(in.data(), out.data(), in.size() / group_size(), ElementTypeOf<T>::value, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest broadcast_async(std::span<T> data, int root) {
    check_peer("broadcast root", root);
    return do_broadcast(data.data(), data.size(), ElementTypeOf<T>::value, root, Completion::Async);
  }
  template <CommElement T>
  [[nodiscard]] CommRequest send_recv_async(In<T> send, int dest, std::span<T> recv, int source) {
    check_peer("send_recv dest", dest);
    check_peer("send_recv source", source);
    return do_send_recv(send.data(), send.size(), dest, recv.data(), recv.size(), source, ElementTypeOf<T>::value,
                        Completion::Async);
  }

 protected:
  // Type-erased operations each backend implements. Counts are elements of `type`; `in == out` in
  // do_all_reduce means in place. With Completion::Blocking the returned request is already complete.
  virtual CommRequest do_all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                                    Completion mode) = 0;
  virtual CommRequest do_reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op,
                                        Completion mode) = 0;
  virtual CommRequest do_all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode) = 0;
  // counts: (size()) elements contributed by each rank.
  virtual CommRequest do_all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type,
                                             Completion mode) = 0;
  virtual CommRequest do_all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode) = 0;
  virtual CommRequest do_broadcast(void* data, size_t count, ElementType type, int root, Completion mode) = 0;
  virtual CommRequest do_send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                                   int source, ElementType type, Completion mode) = 0;

 private:
  size_t group_size() const { return static_cast<size_t>(size()); }
  void check_equal(const char* what, size_t got, size_t want) const {
    TRLHPC_ASSERT(got == want, std::string(what) + " has " + std::to_string(got) + " elements, expected " +
                                   std::to_string(want) + " (group size " + std::to_string(size()) + ")");
  }
  void check_all_to_all(size_t in, size_t out) const {
    check_equal("all_to_all output", out, in);
    TRLHPC_ASSERT(in % group_size() == 0, "all_to_all input of " + std::to_string(in) +
                                              " elements does not split into " + std::to_string(size()) + " blocks");
  }
  void check_variable_counts(size_t in, size_t out, std::span<const size_t> counts) const {
    check_equal("all_gather_variable counts", counts.size(), group_size());
    check_equal("all_gather_variable input", in, counts[static_cast<size_t>(rank())]);
    size_t total = 0;
    for (size_t c : counts) total += c;
    check_equal("all_gather_variable output", out, total);
  }
  void check_peer(const char* what, int peer) const {
    TRLHPC_ASSERT(peer >= 0 && peer < size(),
                  std::string(what) + " " + std::to_string(peer) + " outside the group of " + std::to_string(size()));
  }
};

}  // namespace trlhpc
