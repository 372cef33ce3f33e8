// tokenizer.json from a model directory: loaded, then used once (encode + decode).
#include "fuzz_support.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = (trlhpc::fuzz::scratch_dir() / "tok").string();
  trlhpc::fuzz::write_file("tok/tokenizer.json", trlhpc::fuzz::as_text(data, size));
  trlhpc::fuzz::write_file("tok/tokenizer_config.json", "{}");
  trlhpc::fuzz::expect_user_errors_only([&] {
    const auto tok = trlhpc::tokenizer::Tokenizer::from_directory(dir);
    const auto ids = tok.encode("Hello world! <|im_start|>user\n\xff caf\xc3\xa9 123");
    (void)tok.decode(ids);
  });
  return 0;
}
