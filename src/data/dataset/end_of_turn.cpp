#include "trlhpc/data/dataset/end_of_turn.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace trlhpc::dataset {
namespace {

bool whitespace_only(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  const int32_t one[1] = {id};
  const std::string text = tokenizer.decode(one);
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

EndOfTurnCount mark_end_of_turn(const std::vector<int32_t>& ids, std::vector<uint8_t>& mask,
                                const tokenizer::Tokenizer& tokenizer) {
  EndOfTurnCount count;
  size_t t = 0;
  while (t < ids.size()) {
    if (!mask[t]) {
      ++t;
      continue;
    }
    while (t < ids.size() && mask[t]) ++t;  // the end of a run of assistant tokens
    size_t next = t;
    while (next < ids.size() && !tokenizer.is_special(ids[next]) && whitespace_only(tokenizer, ids[next])) ++next;
    if (next < ids.size() && tokenizer.is_special(ids[next])) {
      std::fill(mask.begin() + static_cast<std::ptrdiff_t>(t), mask.begin() + static_cast<std::ptrdiff_t>(next + 1), 1);
      ++count.marked;
      t = next + 1;
    } else {
      ++count.missing;
    }
  }
  return count;
}

}  // namespace trlhpc::dataset
