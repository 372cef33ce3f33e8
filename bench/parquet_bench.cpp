// Rows per second of trlhpc's Parquet reader: every row of FILE assembled into its JSON object, as
// `trlhpc sft` reads a Hub dataset (bench/parquet_bench.py compares it with pyarrow's to_pylist()).
//   parquet_bench FILE [REPEATS]   -> one JSON line {"rows", "seconds", "rows_per_second"} (best of REPEATS)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "trlhpc/data/parquet/parquet_file.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: parquet_bench FILE.parquet [REPEATS]\n");
    return 1;
  }
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  double best = 1e30;
  int64_t rows = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    trlhpc::parquet::ParquetFile file(argv[1]);
    nlohmann::ordered_json row;
    rows = 0;
    while (file.next(row)) ++rows;
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("{\"rows\": %lld, \"seconds\": %.4f, \"rows_per_second\": %.0f}\n", static_cast<long long>(rows), best, rows / best);
  return 0;
}
