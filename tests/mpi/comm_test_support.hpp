#pragma once
// Shared pieces of the communicator tests: exactly predictable inputs, an element checker that reports
// the first wrong element, and the communicators every test runs on.
//
// Rank r's input element i is v(r, i) = i % 7 + 3 r: small integers, so every sum over up to 8 ranks
// (at most 6*8 + 3*28 = 132) is exact in every element type, bf16 and uint8 included, and max/min are
// the values of the last/first rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc::testing {

inline int64_t v(int rank, size_t i) { return static_cast<int64_t>(i % 7) + 3 * rank; }

template <class T>
T to_element(int64_t x) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return f32_to_bf16(static_cast<float>(x));  // bf16 bits
  else
    return static_cast<T>(x);
}
template <class T>
int64_t from_element(T x) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return static_cast<int64_t>(bf16_to_f32(x));
  else
    return static_cast<int64_t>(x);
}

// n elements: element i = value(i).
template <class T, class Value>
std::vector<T> filled(size_t n, Value&& value) {
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = to_element<T>(value(i));
  return out;
}

// Passes when got[i] == want(i) for every i; otherwise names the count and the first wrong element.
template <class T, class Want>
::testing::AssertionResult matches(std::span<const T> got, Want&& want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (from_element(got[i]) != want(i) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements wrong; first at index " << first
                                       << ": got " << from_element(got[first]) << ", want " << want(first);
}
template <class T, class Want>
::testing::AssertionResult matches(const std::vector<T>& got, Want&& want) {
  return matches(std::span<const T>(got), want);
}

// A communicator to test on: the whole world or halves of it (even/odd ranks), with MPI's own int
// limit or a tiny max_elements_per_call that forces the split (large-count) path on small buffers.
struct CommCase {
  std::string name;
  MpiComm handle;
  std::unique_ptr<MpiCommunicator> comm;
};

inline std::vector<CommCase> make_comm_cases() {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<CommCase> cases;
  auto add = [&](std::string name, MpiComm handle, size_t limit) {
    auto comm = std::make_unique<MpiCommunicator>(handle.get(), MpiCommunicatorOptions{limit});
    cases.push_back(CommCase{std::move(name), std::move(handle), std::move(comm)});
  };
  add("world", MpiComm::duplicate(MPI_COMM_WORLD), MpiCommunicatorOptions{}.max_elements_per_call);
  add("world/split-5", MpiComm::duplicate(MPI_COMM_WORLD), 5);
  add("halves", MpiComm::split(MPI_COMM_WORLD, me % 2, me), MpiCommunicatorOptions{}.max_elements_per_call);
  add("halves/split-3", MpiComm::split(MPI_COMM_WORLD, me % 2, me), 3);
  return cases;
}

// Per-rank counts used by the tests: zero, one, odd, and a few thousand.
inline std::vector<size_t> test_counts() { return {0, 1, 7, 1003}; }

}  // namespace trlhpc::testing
