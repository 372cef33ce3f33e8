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
