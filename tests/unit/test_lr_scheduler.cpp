// Learning-rate schedules against transformers' get_scheduler (fixture from
// tests/golden/make_scheduler_fixture.py): the lr each optimizer step uses, step for step.
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/optim/lr_scheduler.hpp"

namespace trlhpc {
namespace {

TEST(LrScheduler, MatchesTransformersGetScheduler) {
  std::ifstream in(testing::tests_dir() + "/golden/schedulers.json");
  ASSERT_TRUE(in) << "missing tests/golden/schedulers.json";
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    const LrScheduler s(parse_lr_schedule(c["type"]), c["base_lr"], c["warmup"], c["total"]);
    const auto lrs = c["lrs"].get<std::vector<double>>();
    for (size_t step = 0; step < lrs.size(); ++step)
      EXPECT_NEAR(s.lr(static_cast<int64_t>(step)), lrs[step], 1e-12)
          << c["type"] << " total " << c["total"] << " warmup " << c["warmup"] << " step " << step;
  }
}

TEST(LrScheduler, WarmupRatioRoundsUpAsTrainingArguments) {
  EXPECT_EQ(warmup_steps_for(0, 0.1, 95), 10);  // ceil(9.5)
  EXPECT_EQ(warmup_steps_for(3, 0.5, 95), 3);   // explicit steps win
  EXPECT_EQ(warmup_steps_for(0, 0.0, 95), 0);
}

TEST(LrScheduler, UnknownTypeNamesTheOption) {
  try {
    parse_lr_schedule("polynomial_decay");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--lr_scheduler_type polynomial_decay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trlhpc

namespace trlhpc {
namespace {

// cosine_with_min_lr and num_cycles against transformers' lambda (tests/golden/make_min_lr_scheduler_fixture.py),
// with the kwargs as --lr_scheduler_kwargs gives them.
TEST(LrScheduler, MinLrAndCyclesMatchTransformers) {
  std::ifstream in(testing::tests_dir() + "/golden/schedulers_min_lr.json");
  ASSERT_TRUE(in) << "missing tests/golden/schedulers_min_lr.json";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 4u);
  for (const auto& c : fixture["cases"]) {
    const LrSchedule type = parse_lr_schedule(c["type"]);
    const LrScheduler s(type, c["base_lr"], c["warmup"], c["total"],
                        parse_lr_scheduler_kwargs(type, c["kwargs"].dump(), c["base_lr"]));
    const auto lrs = c["lrs"].get<std::vector<double>>();
    for (size_t step = 0; step < lrs.size(); ++step)
      EXPECT_NEAR(s.lr(static_cast<int64_t>(step)), lrs[step], 1e-15)
          << c["type"] << " " << c["kwargs"].dump() << " step " << step;
  }
}

TEST(LrScheduler, KwargsErrorsNameTheOptionAndTheKey) {
  const auto error = [](LrSchedule type, const std::string& kwargs) {
    return testing::user_error([&] { parse_lr_scheduler_kwargs(type, kwargs, 1e-3); });
  };
  EXPECT_NE(error(LrSchedule::CosineWithMinLr, "").find("needs --lr_scheduler_kwargs"), std::string::npos);
  EXPECT_NE(error(LrSchedule::CosineWithMinLr, "{\"min_lr\": 1e-4, \"min_lr_rate\": 0.1}").find("not both"), std::string::npos);
  EXPECT_NE(error(LrSchedule::Linear, "{\"min_lr_rate\": 0.1}").find("'min_lr_rate' is not an argument"), std::string::npos);
  EXPECT_NE(error(LrSchedule::Cosine, "{\"num_cycles\": \"x\"}").find("num_cycles must be a finite number"), std::string::npos);
  EXPECT_NE(error(LrSchedule::Cosine, "[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(error(LrSchedule::Linear, "{}"), "");
  EXPECT_DOUBLE_EQ(parse_lr_scheduler_kwargs(LrSchedule::CosineWithMinLr, "{\"min_lr\": 2e-4}", 1e-3).min_lr_rate, 0.2);
}

}  // namespace
}  // namespace trlhpc
