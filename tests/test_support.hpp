#pragma once
// Helpers shared by the tests: deterministic random inputs, error norms that report the worst element,
// and the location of ../shared/data.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batch.hpp"

namespace trlhpc::testing {

// Folder of the real models/datasets (../shared/data); TRLHPC_SHARED_DATA overrides.
std::string shared_data_dir();
// tests/ folder of the source tree (fixtures live under tests/golden, tests/fixtures).
std::string tests_dir();
// A fresh empty temporary directory, removed by the caller or left for inspection.
std::string make_temp_dir(const std::string& tag);

// Uniform(-scale, scale) floats from a fixed seed.
std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f);

// Compares got against want: passes when max|got-want| <= atol + rtol*|want| for every element;
// otherwise the failure message names the worst element, its index and both values.
::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                                     double atol);
::testing::AssertionResult all_close(const float* got, const float* want, size_t n, double rtol, double atol);
// Normalised error ||got - want|| / max(||want||, tiny).
double normalized_error(const float* got, const double* want, size_t n);
double normalized_error(const std::vector<float>& got, const std::vector<float>& want);  // sizes must match

// Rows of packed documents of random (often odd) lengths 1..7 with positions from 0, random ids and
// targets (the last token of each document without one), right padding at the end of some rows.
Batch random_packed_batch(int64_t rows, int64_t T, uint64_t seed);

// The UserError message `fn` throws, or "" when it throws none (other exceptions propagate).
template <class Fn>
std::string user_error(Fn&& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace trlhpc::testing
