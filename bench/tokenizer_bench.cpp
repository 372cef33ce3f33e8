// Single-core encode throughput of trlhpc's Tokenizer, for bench/tokenizer_bench.py.
//
//   tokenizer_bench TOKENIZER_DIR TEXTS.jsonl [--repeat N] [--dump IDS.jsonl]
//
// TEXTS.jsonl holds one {"text": ...} per line. Every text is encoded (add_special_tokens=false)
// once to warm up, then N times (default 3) timed; the best pass is reported as
//   {"bytes": B, "tokens": T, "seconds": S, "mb_per_s": B / S / 1e6, "cpu_seconds": C,
//    "mb_per_cpu_s": B / C / 1e6, "first_pass_cpu_seconds": F, "load_seconds": L}
// on stdout, S in wall-clock time and C in this thread's CPU time (what a shared, busy machine
// distorts least). --dump writes the ids of each text, one JSON list per line, for comparison.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenizer_bench TOKENIZER_DIR TEXTS.jsonl [--repeat N] [--dump IDS.jsonl]\n";
    return 1;
  }
  int repeat = 3;
  std::string dump;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--repeat") repeat = std::stoi(argv[i + 1]);
    else if (flag == "--dump") dump = argv[i + 1];
  }

  std::vector<std::string> texts;
  size_t bytes = 0;
  std::ifstream in(argv[2]);
  TRLHPC_REQUIRE(in.good(), std::string(argv[2]) + ": cannot be read");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    bytes += texts.back().size();
  }

  const auto load_start = std::chrono::steady_clock::now();
  const auto tokenizer = trlhpc::tokenizer::Tokenizer::from_directory(argv[1]);
  const double load_seconds = seconds_since(load_start);

  // Warm-up pass, timed too: with an empty word cache it shows the cost on text never seen before.
  size_t tokens = 0;
  const double first_start = thread_cpu_seconds();
  for (const auto& text : texts) tokens += tokenizer.encode(text, false).size();
  const double first_pass_cpu = thread_cpu_seconds() - first_start;
  double best = 1e30, best_cpu = 1e30;
  for (int pass = 0; pass < repeat; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    size_t count = 0;
    for (const auto& text : texts) count += tokenizer.encode(text, false).size();
    best_cpu = std::min(best_cpu, thread_cpu_seconds() - cpu_start);
    best = std::min(best, seconds_since(start));
    tokens = count;
  }
  if (!dump.empty()) {
    std::ofstream out(dump);
    for (const auto& text : texts) out << nlohmann::json(tokenizer.encode(text, false)).dump() << "\n";
  }
  std::printf(
      "{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_per_s\": %.3f, \"cpu_seconds\": %.6f, "
      "\"mb_per_cpu_s\": %.3f, \"first_pass_cpu_seconds\": %.6f, \"load_seconds\": %.3f}\n",
      bytes, tokens, best, static_cast<double>(bytes) / best / 1e6, best_cpu,
      static_cast<double>(bytes) / best_cpu / 1e6, first_pass_cpu, load_seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const trlhpc::UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
