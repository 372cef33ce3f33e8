// Hostile chat templates (issue 18): each input fuzzing found ends in a UserError naming the limit, not in
// a crash, a hang or an out-of-memory, and the limits of limits.hpp leave room for real templates (the
// expected values below are what Python/jinja2 computes, within 64-bit integers).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/chat_template.hpp"
#include "trlhpc/data/chat_template/limits.hpp"

namespace {

using trlhpc::chat_template::ChatTemplate;
using Json = nlohmann::json;
namespace limits = trlhpc::chat_template;

Json one_message() { return Json::array({{{"role", "user"}, {"content", "hi"}}}); }

std::string render(const std::string& source, const Json& messages = one_message()) {
  return ChatTemplate::parse(source).render(messages, false).text;
}

// The UserError message of parsing + rendering, or "<no error>".
std::string error_of(const std::string& source, const Json& messages = one_message()) {
  try {
    render(source, messages);
  } catch (const trlhpc::UserError& e) {
    return e.what();
  }
  return "<no error>";
}

std::string repeated(const std::string& piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

#define EXPECT_ERROR_WITH(source, needle)                                  \
  do {                                                                     \
    const std::string message_ = error_of(source);                         \
    EXPECT_NE(message_.find(needle), std::string::npos) << message_;       \
  } while (0)

TEST(ChatTemplateLimits, WrongTypeIntegerArgumentsAreTypeErrors) {
  for (const char* source : {"{{ 'a'.replace('a','b','x') }}", "{{ 'a b'.split(' ', 'x') }}",
                             "{{ 'a'|replace('a','b','x') }}", "{{ '5'|int(0,'x') }}", "{{ 1.5|round('x') }}"}) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find("'str' object cannot be interpreted as an integer"), std::string::npos) << source << ": " << e;
    EXPECT_NE(e.find("chat template line 1, column"), std::string::npos) << e;
  }
  EXPECT_EQ(render("{{ 'aaa'.replace('a','b',2) }}"), "bba");  // the integer form still works
}

TEST(ChatTemplateLimits, TojsonIndentIsBounded) {
  EXPECT_ERROR_WITH("{{ messages|tojson(indent=100000000000) }}", "kMaxIndentWidth");
  EXPECT_ERROR_WITH("{{ 'x'|indent(100000000000) }}", "kMaxIndentWidth");
  EXPECT_EQ(render("{{ [1]|tojson(indent=2) }}"), "[\n  1\n]");  // json.dumps([1], indent=2)
}

TEST(ChatTemplateLimits, RepetitionIsRefusedBeforeAllocating) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR_WITH("{{ [1]*10000000000 }}", "kMaxListItems");
  EXPECT_ERROR_WITH("{{ \"ab\"*100000000000 }}", "kMaxStringBytes");
  EXPECT_ERROR_WITH("{{ ''*1000000000000000000 ~ 'x' }}", "<no error>");  // empty: nothing to build, no loop
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(render("{{ 'ab'*3 }}{{ [1]*2 }}{{ 2*'c' }}"), "ababab[1, 1]cc");
}

TEST(ChatTemplateLimits, DoublingAStringInALoopStopsAtTheLimit) {
  EXPECT_ERROR_WITH("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                    "trlhpc's limit (kMax");  // the step budget (big strings weigh) or the string size, whichever first
  EXPECT_ERROR_WITH("{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}", "kMaxStringBytes");
}

TEST(ChatTemplateLimits, IntegerOverflowIsAnError) {
  for (const char* source : {"{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
                             "{{ 9223372036854775807 * 2 }}", "{{ -(-9223372036854775807 - 1) }}",
                             "{{ (-9223372036854775807 - 1) // -1 }}", "{{ 2 ** 63 }}", "{{ 3 ** 1000000000000 }}",
                             "{{ (-9223372036854775807 - 1)|abs }}", "{{ 1e300|int }}", "{{ 99999999999999999999 }}",
                             "{{ 0xffffffffffffffffff }}"}) {
    const std::string e = error_of(source);
    EXPECT_TRUE(e.find("does not fit in 64 bits") != std::string::npos) << source << ": " << e;
  }
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }}"), "9223372036854775807");
  EXPECT_EQ(render("{{ 2 ** 62 }}|{{ (-2) ** 63 }}|{{ 1 ** 1000000000000 }}"),
            "4611686018427387904|-9223372036854775808|1");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}|{{ -7 // 2 }}|{{ -7 % 3 }}"), "0|-4|2");
}

TEST(ChatTemplateLimits, SliceAndRangeStepsNearTheInt64RangeEnd) {
  EXPECT_EQ(render("{{ [1,2,3][1::9223372036854775807] }}"), "[2]");
  EXPECT_EQ(render("{{ 'abc'[::-9223372036854775807] }}"), "c");
  EXPECT_EQ(render("{{ range(9223372036854775806, 9223372036854775807, 9223372036854775807)|list }}"),
            "[9223372036854775806]");
}

TEST(ChatTemplateLimits, DeepNestingIsRefusedNotAStackOverflow) {
  EXPECT_ERROR_WITH("{{ " + repeated("(", 5000) + "1" + repeated(")", 5000) + " }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH("{{ " + repeated("[", 5000) + "1" + repeated("]", 5000) + " }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH("{{ " + repeated("not ", 5000) + "1 }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH("{{ " + repeated("-", 5000) + "1 }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH("{{ 1" + repeated(" + 1", 5000) + " }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH("{{ 'a'" + repeated("|trim", 5000) + " }}", "kMaxTemplateNesting");
  EXPECT_ERROR_WITH(repeated("{% if 1 %}", 5000) + repeated("{% endif %}", 5000), "kMaxTemplateNesting");
  // Real templates nest far less; well inside the limit everything still works.
  EXPECT_EQ(render("{{ " + repeated("(", 50) + "1" + repeated(")", 50) + " }}"), "1");
  EXPECT_EQ(render("{{ 0" + repeated(" + 1", 100) + " }}"), "100");
  EXPECT_EQ(render(repeated("{% if 1 %}", 50) + "x" + repeated("{% endif %}", 50)), "x");
}

TEST(ChatTemplateLimits, RecursiveMacrosStopAtTheCallDepth) {
  EXPECT_ERROR_WITH("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "kMaxMacroCallDepth");
  // Exponential recursion ends at the step budget instead of running for ages.
  EXPECT_ERROR_WITH("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
                    "kMaxRenderSteps");
  // A recursion a few levels deep (nested tool schemas) is fine: countdown from 20.
  EXPECT_EQ(render("{% macro f(n) %}{{ n }}{% if n > 0 %},{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) }}"),
            "20,19,18,17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0");
}

TEST(ChatTemplateLimits, EndlessLoopsEndAtTheStepBudget) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_ERROR_WITH("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                    "kMaxRenderSteps");
  EXPECT_ERROR_WITH("{% set big = range(100000)|list %}{% for i in range(100000) %}{{ big|length }}{% endfor %}",
                    "kMaxRenderSteps");  // each mention of a big value counts its size
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // A long conversation is far from the budget: 2000 messages through a ChatML loop.
  Json many = Json::array();
  for (int i = 0; i < 2000; ++i) many.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "message"}});
  const std::string chatml =
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}{% endfor %}";
  EXPECT_EQ(render(chatml, many).size(), 2000 * std::string("<|im_start|>user\nmessage<|im_end|>\n").size() + 1000 * 5);  // "assistant" is 5 bytes longer than "user"
}

TEST(ChatTemplateLimits, DeepValuesAndSelfHoldingNamespacesAreRefused) {
  const Json deep = Json::parse(std::string(5000, '[') + "\"x\"" + std::string(5000, ']'));
  const std::string e = error_of("{{ messages }}", Json::array({{{"role", "user"}, {"content", deep}}}));
  EXPECT_NE(e.find("chat message 0"), std::string::npos) << e;
  EXPECT_NE(e.find("kMaxValueDepth"), std::string::npos) << e;
  EXPECT_ERROR_WITH("{% set ns = namespace(x=[]) %}{% for i in range(10000) %}{% set ns.x = [ns.x] %}{% endfor %}",
                    "kMaxValueDepth");
  EXPECT_ERROR_WITH("{% set ns = namespace(x=1) %}{% set ns.x = ns %}{{ ns }}", "cannot hold a namespace");
  EXPECT_ERROR_WITH("{% set ns = namespace(x=1) %}{% set ns.x = [ns].count %}", "cannot hold a namespace");
}

TEST(ChatTemplateLimits, PrintfWidthIsBoundedAndLongStringsAreNotCut) {
  EXPECT_ERROR_WITH("{{ '%99999999999d' % 1 }}", "kMaxFormatWidth");
  const std::string long_text(2000, 'y');
  EXPECT_EQ(render("{{ '%s!' % messages[0].content }}", Json::array({{{"role", "user"}, {"content", long_text}}})),
            long_text + "!");
  EXPECT_EQ(render("{{ '%05d|%-3s|%.2f' % (42, 'a', 1.5) }}"), "00042|a  |1.50");
}

TEST(ChatTemplateLimits, LongLinesLexInLinearTime) {
  const std::string line = repeated("{{ 1 }}", 6000);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(render(line), std::string(6000, '1'));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  // Columns are still exact after many tokens on one line (1-based, in code points).
  const std::string prefix = repeated("{{ 'é' }}", 300);  // 9 code points each
  const std::string e = error_of(prefix + "{{ x|nope }}");
  EXPECT_NE(e.find("line 1, column " + std::to_string(300 * 9 + 6)), std::string::npos) << e;
}

}  // namespace
