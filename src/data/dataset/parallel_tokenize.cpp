#include "trlhpc/data/dataset/parallel_tokenize.hpp"

#include <algorithm>
#include <exception>
#include <thread>

#include "trlhpc/data/dataset/sft_dataset.hpp"

namespace trlhpc::dataset {

std::vector<TokenizedExample> tokenize_rows_in_order(const RowTokenizer& tokenizer, const std::vector<DatasetRow>& rows,
                                                     int64_t threads) {
  std::vector<TokenizedExample> out(rows.size());
  std::vector<std::exception_ptr> errors(rows.size());
  const size_t workers = std::max<size_t>(1, std::min(rows.size(), static_cast<size_t>(std::max<int64_t>(threads, 1))));
  // Worker w takes rows w, w + workers, ...: interleaved, so long and short rows spread over the threads.
  auto work = [&](size_t first) {
    for (size_t i = first; i < rows.size(); i += workers) {
      try {
        out[i] = tokenizer.tokenize(rows[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(workers - 1);
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);
  }  // the jthreads join here
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace trlhpc::dataset
