// Data pipeline benchmark: reading + validating a generated 100k-row conversational dataset (JSONL and
// JSON array), packing 100k examples (bfd, wrapped), collating every packed row into micro-batches, and the
// sampler's epoch permutation. Tokenization is not measured: example lengths are chars/4 of each row and
// token ids are fake.
//
//   data_bench [rows=100000] [max_length=4096]
// Prints one line per stage with seconds and a rate, and the peak resident memory (reading streams, so it
// should not grow with the file size).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trlhpc/data/batching/packing.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/dataset/form.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// A conversation of 1-4 user/assistant turns with contents of 20-1500 characters (lognormal-ish via squares).
std::string make_row(std::mt19937_64& gen) {
  static const char* words[] = {"the", "model", "packing", "token", "cluster", "rank", "gradient", "batch",
                                "quote\\\"d", "unicode \\u00e9", "sequence", "attention", "loss", "step"};
  std::uniform_int_distribution<int> turns_dist(1, 4), word_dist(0, 13);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::string row = "{\"messages\": [";
  int turns = turns_dist(gen);
  for (int t = 0; t < turns; ++t) {
    for (const char* role : {"user", "assistant"}) {
      size_t chars = 20 + static_cast<size_t>(1480 * u(gen) * u(gen));
      std::string content;
      while (content.size() < chars) content += std::string(words[word_dist(gen)]) + " ";
      if (row.back() != '[') row += ", ";
      row += "{\"role\": \"" + std::string(role) + "\", \"content\": \"" + content + "\"}";
    }
  }
  return row + "]}";
}

void report(const char* stage, double secs, double count, const char* unit) {
  std::printf("%-34s %8.3f s  %12.0f %s/s   peak RSS %7.1f MiB\n", stage, secs, count / secs, unit, peak_rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 100000;
  const int32_t max_length = argc > 2 ? std::atoi(argv[2]) : 4096;
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("trlhpc-data-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string jsonl = (dir / "train.jsonl").string(), array = (dir / "train.json").string();

  auto start = Clock::now();
  {
    std::mt19937_64 gen(1);
    std::ofstream lines(jsonl), arr(array);
    arr << "[\n";
    for (int64_t i = 0; i < rows; ++i) {
      std::string row = make_row(gen);
      lines << row << '\n';
      arr << (i ? ",\n" : "") << row;
    }
    arr << "\n]\n";
  }
  const double mib = static_cast<double>(fs::file_size(jsonl)) / (1 << 20);
  std::printf("generated %lld rows, %.1f MiB per file, in %.2f s\n", static_cast<long long>(rows), mib,
              seconds_since(start));

  std::vector<int32_t> lengths;
  lengths.reserve(static_cast<size_t>(rows));
  for (const std::string& file : {jsonl, array}) {
    lengths.clear();
    start = Clock::now();
    std::clock_t cpu_start = std::clock();
    trlhpc::dataset::DatasetReader reader({file});
    auto on_row = [&](const trlhpc::dataset::DatasetRow& row, const trlhpc::dataset::DatasetFormSpec&) {
      int64_t chars = 0;
      for (const auto& m : row.value["messages"]) chars += m["content"].get_ref<const std::string&>().size();
      lengths.push_back(static_cast<int32_t>(chars / 4 + 8));
    };
    auto scan = trlhpc::dataset::scan_dataset(reader, "text", on_row);
    double secs = seconds_since(start);
    report(file == jsonl ? "read+validate JSONL" : "read+validate JSON array", secs, static_cast<double>(scan.rows),
           "rows");
    double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    std::printf("%-34s %8.1f MiB/s wall, %.3f s CPU (%.1f MiB/s)\n", "", mib / secs, cpu, mib / cpu);
  }

  int64_t total_tokens = 0;
  for (int32_t l : lengths) total_tokens += std::min(l, max_length);
  std::vector<trlhpc::dataset::TokenizedExample> examples(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    examples[i].input_ids.assign(static_cast<size_t>(lengths[i]), static_cast<int32_t>(i % 32000));
    examples[i].loss_mask.assign(static_cast<size_t>(lengths[i]), 1);
  }
  std::printf("examples: %zu, tokens after truncation to %d: %lld\n", examples.size(), max_length,
              static_cast<long long>(total_tokens));

  for (int64_t map_batch : {int64_t{1000}, int64_t{0}}) {
    trlhpc::batching::PackingOptions options{.max_length = max_length, .map_batch_size = map_batch};
    for (auto strategy : {trlhpc::batching::PackingStrategy::kBfd, trlhpc::batching::PackingStrategy::kWrapped}) {
      start = Clock::now();
      auto packed = trlhpc::batching::pack(strategy, lengths, options);
      double secs = seconds_since(start);
      int64_t used = 0;
      for (const auto& row : packed) used += row.length();
      char name[96];
      const char* strategy_name = strategy == trlhpc::batching::PackingStrategy::kBfd ? "bfd" : "wrapped";
      std::snprintf(name, sizeof name, "pack %s (map batch %lld)", strategy_name, static_cast<long long>(map_batch));
      report(name, secs, static_cast<double>(lengths.size()), "examples");
      std::printf("%-34s %zu rows, fill %.2f%%\n", "", packed.size(),
                  100.0 * static_cast<double>(used) / (static_cast<double>(packed.size()) * max_length));

      if (strategy == trlhpc::batching::PackingStrategy::kBfd && map_batch == 1000) {
        trlhpc::batching::DistributedSampler sampler(
            {.num_rows = static_cast<int64_t>(packed.size()), .per_device_batch_size = 8, .dp = 1});
        start = Clock::now();
        const auto& order = sampler.epoch_order(0);
        report("sampler epoch permutation", seconds_since(start), static_cast<double>(order.size()), "rows");
        start = Clock::now();
        int64_t tokens = 0;
        for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
          auto pick = sampler.micro_batch(0, step, 0, 0);
          auto batch = trlhpc::batching::collate(examples, packed, pick, {.padding_free = true, .pad_to_multiple_of = 8});
          tokens += batch.tokens();
        }
        report("collate epoch (padding_free, B=8)", seconds_since(start), static_cast<double>(tokens), "tokens");
      }
    }
  }
  fs::remove_all(dir);
  return 0;
}
