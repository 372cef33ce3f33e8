// A dataset file (--dataset_name): JSON Lines or a JSON array, read, form-detected and validated, with
// and without --skip_bad_rows.
#include "fuzz_support.hpp"
#include "trlhpc/data/dataset/form.hpp"
#include "trlhpc/data/dataset/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = trlhpc::fuzz::as_text(data, size);
  // The first byte picks the file name: .jsonl is always JSON Lines; .json may be an array.
  const std::string path = trlhpc::fuzz::write_file(size > 0 && data[0] % 2 ? "data.json" : "data.jsonl", text);
  for (bool skip : {false, true}) {
    trlhpc::fuzz::expect_user_errors_only([&] {
      trlhpc::dataset::DatasetReader reader({path}, {skip});
      (void)trlhpc::dataset::scan_dataset(reader, "text", [](const auto&, const auto&) {});
    });
  }
  return 0;
}
