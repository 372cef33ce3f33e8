#pragma once
// Vocabulary shared by the communicators: element types, reduction ops, and CommRequest, the handle a
// non-blocking collective returns.
//
// C++17 on purpose: the NCCL implementation is compiled by nvcc, which cmake/cuda.cmake runs in C++17
// mode, so nothing here may use std::span or concepts (communicator.hpp adds the C++20 typed API).
#include <cstddef>
#include <cstdint>
#include <memory>

namespace trlhpc {

// Element type of a collective's buffers. uint16_t buffers are bf16 bit patterns: reductions convert
// to fp32, combine, and round to nearest even (the project stores bf16 as uint16_t, see core/dtype.hpp).
enum class ElementType : uint8_t { F32, F64, I32, I64, U8, BF16 };
enum class ReduceOp : uint8_t { Sum, Max, Min };
// Blocking: the data is complete when the call returns. Async: complete after CommRequest::wait().
enum class Completion : uint8_t { Blocking, Async };

size_t element_size(ElementType type);

// The C++ element type decides the ElementType; nothing else may (no byte counts as element counts).
template <class T>
struct ElementTypeOf;
template <> struct ElementTypeOf<float> { static constexpr ElementType value = ElementType::F32; };
template <> struct ElementTypeOf<double> { static constexpr ElementType value = ElementType::F64; };
template <> struct ElementTypeOf<int32_t> { static constexpr ElementType value = ElementType::I32; };
template <> struct ElementTypeOf<int64_t> { static constexpr ElementType value = ElementType::I64; };
template <> struct ElementTypeOf<uint8_t> { static constexpr ElementType value = ElementType::U8; };
template <> struct ElementTypeOf<uint16_t> { static constexpr ElementType value = ElementType::BF16; };

// What a backend keeps alive for one in-flight operation (MPI requests and their argument arrays, or
// a CUDA event recorded after the NCCL calls).
class PendingOperation {
 public:
  virtual ~PendingOperation() = default;
  virtual bool test() = 0;  // true once complete; never blocks
  virtual void wait() = 0;  // blocks until complete
};

// Move-only handle of a non-blocking collective. The buffers passed to the collective must stay alive
// and untouched until wait() returns or test() returns true. A default-constructed handle is complete.
// Destroying an incomplete handle waits for it (so buffers are never freed under an in-flight
// operation), except while an exception unwinds: then it abandons the operation, because the peers may
// never arrive and the MPI environment is about to abort the job.
class CommRequest {
 public:
  CommRequest() = default;
  explicit CommRequest(std::unique_ptr<PendingOperation> pending);
  ~CommRequest();
  CommRequest(CommRequest&&) noexcept = default;
  CommRequest& operator=(CommRequest&& other) noexcept;
  CommRequest(const CommRequest&) = delete;
  CommRequest& operator=(const CommRequest&) = delete;

  void wait();
  bool test();
  bool done() const { return pending_ == nullptr; }

 private:
  void finish_on_destruction() noexcept;

  std::unique_ptr<PendingOperation> pending_;  // null once complete
  int uncaught_at_start_ = 0;
};

}  // namespace trlhpc
