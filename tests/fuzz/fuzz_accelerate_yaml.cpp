// An accelerate YAML config (--accelerate_config FILE).
#include "fuzz_support.hpp"
#include "trlhpc/cli/accelerate_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trlhpc::fuzz::expect_user_errors_only(
      [&] { (void)trlhpc::parse_accelerate_config(trlhpc::fuzz::as_text(data, size), "fuzz.yaml", false, 8); });
  return 0;
}
