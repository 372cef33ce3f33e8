// Encoding untrusted text (dataset rows, any bytes) with the fixture tokenizers: ids must decode,
// offsets must lie inside the input and be ordered.
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

namespace {
std::vector<trlhpc::tokenizer::Tokenizer> load_tokenizers() {
  std::vector<trlhpc::tokenizer::Tokenizer> out;
  for (const char* name : {"bytelevel-gpt2", "bytelevel-llama3", "sp-bytefallback", "sp-metaspace-unk"})
    out.push_back(trlhpc::tokenizer::Tokenizer::from_directory(std::string(TRLHPC_SOURCE_DIR "/tests/fixtures/tokenizers/") + name));
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<trlhpc::tokenizer::Tokenizer> tokenizers = load_tokenizers();
  const std::string text = trlhpc::fuzz::as_text(data, size);
  for (const auto& tok : tokenizers) {
    const auto encoded = tok.encode_with_offsets(text, size % 2 == 0);
    if (encoded.ids != tok.encode(text, size % 2 == 0)) std::abort();
    if (encoded.offsets.size() != encoded.ids.size()) std::abort();
    for (const auto& [begin, end] : encoded.offsets)
      if (begin > end || end > text.size()) std::abort();
    (void)tok.decode(encoded.ids, size % 3 == 0);
  }
  return 0;
}
