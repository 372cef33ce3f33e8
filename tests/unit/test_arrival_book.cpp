// The hang watchdog's "not arrived" bookkeeping (collective_watchdog.hpp) without MPI: given the notices
// received, ArrivalBook names exactly the members that have not issued collective #k; and `--ddp_timeout`
// parsing (default 1800, 0 allowed, negative or non-numeric refused with a message naming the flag).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/collective_watchdog.hpp"

namespace trlhpc {
namespace {

TEST(ArrivalBook, NamesExactlyTheMembersWithoutANoticeForTheCollective) {
  // 5 members, self = 2. Member 0 issued 3 collectives, member 1 one, member 3 three, member 4 none.
  ArrivalBook book(5, 2);
  for (int i = 0; i < 3; ++i) book.record_notice(0);
  book.record_notice(1);
  for (int i = 0; i < 3; ++i) book.record_notice(3);
  EXPECT_EQ(book.enter(), 1u);
  EXPECT_EQ(book.not_arrived(1), (std::vector<int>{4}));
  EXPECT_FALSE(book.all_arrived(1));
  EXPECT_EQ(book.enter(), 2u);
  EXPECT_EQ(book.not_arrived(2), (std::vector<int>{1, 4}));
  EXPECT_EQ(book.enter(), 3u);
  EXPECT_EQ(book.not_arrived(3), (std::vector<int>{1, 4}));
  EXPECT_TRUE(book.arrived(0, 3));
  EXPECT_TRUE(book.arrived(2, 3));   // self: by its own count
  EXPECT_FALSE(book.arrived(2, 4));
  EXPECT_FALSE(book.arrived(1, 2));
  for (int i = 0; i < 2; ++i) book.record_notice(1);
  for (int i = 0; i < 3; ++i) book.record_notice(4);
  EXPECT_TRUE(book.not_arrived(3).empty());
  EXPECT_TRUE(book.all_arrived(3));
  EXPECT_EQ(book.not_arrived(4), (std::vector<int>{0, 1, 3, 4}));  // nobody is at #4 yet
}

TEST(ArrivalBook, SingleMemberGroupHasNobodyToWaitFor) {
  ArrivalBook book(1, 0);
  EXPECT_EQ(book.enter(), 1u);
  EXPECT_TRUE(book.not_arrived(1).empty());
  EXPECT_TRUE(book.all_arrived(1));
}

SftConfig parse(std::vector<std::string> args) {
  SftConfig config;
  parse_sft_options(args, config, nullptr, SftOptionContext{});
  return config;
}

TEST(DdpTimeoutOption, DefaultsToHuggingFacesAndAcceptsZero) {
  EXPECT_EQ(parse({}).ddp_timeout, 1800.0);
  EXPECT_EQ(parse({"--ddp_timeout", "0"}).ddp_timeout, 0.0);
  EXPECT_EQ(parse({"--ddp_timeout", "20.5"}).ddp_timeout, 20.5);
}

TEST(DdpTimeoutOption, RefusesNegativeAndNonNumbersNamingTheFlag) {
  for (const char* bad : {"-1", "nan", "inf", "soon"}) {
    try {
      parse({"--ddp_timeout", bad});
      ADD_FAILURE() << "--ddp_timeout " << bad << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("ddp_timeout"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace trlhpc
