#include "test_support.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>

namespace trlhpc::testing {

std::string shared_data_dir() {
  if (const char* env = std::getenv("TRLHPC_SHARED_DATA")) return env;
  return TRLHPC_SHARED_DATA_DIR;
}

std::string tests_dir() { return TRLHPC_TESTS_DIR; }

std::string make_temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("trlhpc-" + tag + "-XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return std::string(buffer.data());
}

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> out(n);
  for (auto& x : out) x = dist(gen);
  return out;
}

namespace {
template <class Want>
::testing::AssertionResult compare(const float* got, const Want* want, size_t n, double rtol, double atol) {
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < n; ++i) {
    double g = got[i], w = static_cast<double>(want[i]);
    double err = std::fabs(g - w), bound = atol + rtol * std::fabs(w);
    bool ok = err <= bound && std::isfinite(g) == std::isfinite(w);
    if (!ok) ++bad;
    double excess = std::isnan(g) ? 1e300 : err - bound;
    if (!ok && excess > worst_excess) worst_excess = excess, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << n << " elements differ; worst at index " << worst << ": got " << got[worst] << ", want "
     << static_cast<double>(want[worst]) << " (rtol " << rtol << ", atol " << atol << ")";
  return ::testing::AssertionFailure() << os.str();
}
}  // namespace

::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                                     double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  return compare(got.data(), want.data(), got.size(), rtol, atol);
}

::testing::AssertionResult all_close(const float* got, const float* want, size_t n, double rtol, double atol) {
  return compare(got, want, n, rtol, atol);
}

double normalized_error(const float* got, const double* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
  const std::vector<double> wide(want.begin(), want.end());
  return got.size() == want.size() ? normalized_error(got.data(), wide.data(), want.size())
                                   : std::numeric_limits<double>::infinity();
}

Batch random_packed_batch(int64_t rows, int64_t T, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  b.rows = rows;
  b.seq_len = T;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = 0;
    int32_t doc = 0;
    const int64_t used = T - static_cast<int64_t>(rng() % static_cast<uint64_t>(T / 2 + 1));
    while (t < used) {
      const int64_t len = std::min<int64_t>(used - t, 1 + static_cast<int64_t>(rng() % 7));
      for (int64_t i = 0; i < len; ++i, ++t) {
        b.input_ids.push_back(static_cast<int32_t>(1 + rng() % 50));
        b.targets.push_back(i + 1 < len ? static_cast<int32_t>(rng() % 50) : kIgnoreIndex);
        b.positions.push_back(static_cast<int32_t>(i));
        b.doc_ids.push_back(doc);
      }
      ++doc;
    }
    for (; t < T; ++t) {
      b.input_ids.push_back(0);
      b.targets.push_back(kIgnoreIndex);
      b.positions.push_back(0);
      b.doc_ids.push_back(kPaddingDocId);
    }
  }
  return b;
}

}  // namespace trlhpc::testing
