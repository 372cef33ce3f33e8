// A Parquet dataset file (--dataset_name x.parquet, a Hub dataset's data/*.parquet): footer, schema,
// pages, codecs, levels and record assembly, then form detection and row validation as training does.
// Rows past kFuzzMaxRows are not read: a page may legally claim 2M entries from a few bytes (an RLE run
// of nulls), and reading millions of rows is work, not a bug; the limits bound everything else.
#include "fuzz_support.hpp"
#include "trlhpc/data/dataset/form.hpp"
#include "trlhpc/data/dataset/reader.hpp"
#include "trlhpc/data/parquet/parquet_file.hpp"

namespace {
constexpr int64_t kFuzzMaxRows = 20000;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trlhpc::fuzz::write_file("data.parquet", trlhpc::fuzz::as_text(data, size));
  trlhpc::fuzz::expect_user_errors_only([&] {
    trlhpc::parquet::ParquetFile file(path);
    nlohmann::ordered_json row;
    for (int64_t n = 0; n < kFuzzMaxRows && file.next(row); ++n) (void)row.dump();  // dump: strings are valid UTF-8
  });
  trlhpc::fuzz::expect_user_errors_only([&] {
    trlhpc::dataset::DatasetReader reader({path});
    trlhpc::dataset::DatasetRow row;
    int64_t n = 0;
    while (n < kFuzzMaxRows && reader.next(row)) {
      if (n++ == 0) (void)trlhpc::dataset::detect_dataset_form(row);
    }
  });
  return 0;
}
