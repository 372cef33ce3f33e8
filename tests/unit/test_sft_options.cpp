// trlhpc sft's command line: a flag given twice keeps its last value (argparse's rule, which TRL and
// accelerate job scripts rely on when they append overrides), and the command line wins over --config
// YAML wherever the flag stands.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"

namespace trlhpc {
namespace {

SftConfig parsed(const std::vector<std::string>& args) {
  SftConfig config;
  EXPECT_TRUE(parse_sft_options(args, config, nullptr, SftOptionContext{1, false}));
  return config;
}

std::string yaml_file(const std::string& text) {
  const std::string path = testing::make_temp_dir("sft_options") + "/run.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(SftOptions, RepeatedFlagKeepsTheLastValue) {
  EXPECT_DOUBLE_EQ(parsed({"--learning_rate", "1e-4", "--learning_rate", "2e-5"}).learning_rate, 2e-5);
  EXPECT_EQ(parsed({"--max_steps", "5", "--seed", "7", "--max_steps", "9"}).max_steps, 9);
  EXPECT_EQ(parsed({"--max_steps", "5", "--seed", "7", "--max_steps", "9"}).seed, 7u);
  EXPECT_FALSE(parsed({"--packing", "--packing", "false"}).packing);
  EXPECT_TRUE(parsed({"--packing", "false", "--packing"}).packing);
  EXPECT_EQ(parsed({"--output_dir=a", "--output_dir", "b"}).output_dir, "b");
}

TEST(SftOptions, CommandLineWinsOverTheConfigFileWhereverItStands) {
  const std::string yaml = yaml_file("learning_rate: 3e-3\nmax_steps: 4\nseed: 11\n");
  const SftConfig before = parsed({"--learning_rate", "1e-4", "--config", yaml});
  EXPECT_DOUBLE_EQ(before.learning_rate, 1e-4);
  EXPECT_EQ(before.max_steps, 4);
  const SftConfig after = parsed({"--config", yaml, "--learning_rate", "1e-4", "--learning_rate", "5e-5"});
  EXPECT_DOUBLE_EQ(after.learning_rate, 5e-5);
  EXPECT_EQ(after.seed, 11u);
}

TEST(SftOptions, RepeatedConfigKeepsTheLastFile) {
  const std::string a = yaml_file("max_steps: 4\n"), b = yaml_file("max_steps: 6\n");
  EXPECT_EQ(parsed({"--config", a, "--config", b}).max_steps, 6);
}

TEST(SftOptions, RepeatedFlagStillCountsAsExplicitOverTheAccelerateProfile) {
  const SftConfig c = parsed({"--sharding", "zero1", "--accelerate_config", "zero2", "--sharding", "zero3"});
  EXPECT_EQ(c.sharding, "zero3");
}

TEST(SftOptions, UnknownAndMisspeltFlagsAreStillErrors) {
  SftConfig config;
  EXPECT_THROW(parse_sft_options({"--learning_rat", "1"}, config, nullptr, SftOptionContext{1, false}), UserError);
  EXPECT_THROW(parse_sft_options({"--learning_rate", "x", "--learning_rate", "1"}, config, nullptr,
                                 SftOptionContext{1, false}),
               UserError);  // an overridden value is still checked, as argparse converts every occurrence
}

// A --config file is not a command line: an unknown key or a bad value names the file and the line
// (it used to be "unrecognised option '--learning_rat'", sending the user to the command line).
TEST(SftOptions, ConfigFileErrorsNameTheFileAndLine) {
  SftConfig config;
  const std::string unknown = yaml_file("max_steps: 4\n# a comment\nlearning_rat: 1e-4\n");
  const std::string e = testing::user_error([&] { parse_sft_options({"--config", unknown}, config, nullptr, {1, false}); });
  EXPECT_NE(e.find("--config " + unknown + ":3: unknown option 'learning_rat'"), std::string::npos) << e;
  const std::string bad_value = yaml_file("max_steps: four\n");
  const std::string v = testing::user_error([&] { parse_sft_options({"--config", bad_value}, config, nullptr, {1, false}); });
  EXPECT_NE(v.find("--config " + bad_value + ":1: "), std::string::npos) << v;
  EXPECT_NE(v.find("max_steps"), std::string::npos) << v;
  const std::string nested = yaml_file("config: other.yaml\n");
  const std::string n = testing::user_error([&] { parse_sft_options({"--config", nested}, config, nullptr, {1, false}); });
  EXPECT_NE(n.find(":1: unknown option 'config'"), std::string::npos) << n;
}

// --chat_template_kwargs: JSON text on the command line; in --config YAML a mapping (typed as YAML reads
// it) or the JSON text; anything but an object, or a key apply_chat_template sets itself, is refused.
TEST(SftOptions, ChatTemplateKwargsFromTheCommandLineAndYaml) {
  using chat_template::parse_chat_template_kwargs;
  const auto kwargs = [](const SftConfig& c) { return parse_chat_template_kwargs(c.chat_template_kwargs, "--chat_template_kwargs"); };
  EXPECT_EQ(kwargs(parsed({"--chat_template_kwargs", R"({"enable_thinking": false})"})),
            nlohmann::ordered_json::parse(R"({"enable_thinking": false})"));
  const std::string mapping = yaml_file("chat_template_kwargs: {enable_thinking: false, name: 'true', n: 3, x: 2.5, z: null}\n");
  EXPECT_EQ(kwargs(parsed({"--config", mapping})).dump(), R"({"enable_thinking":false,"name":"true","n":3,"x":2.5,"z":null})");
  const std::string text = yaml_file("chat_template_kwargs: '{\"enable_thinking\": true}'\n");
  EXPECT_EQ(kwargs(parsed({"--config", text})).dump(), R"({"enable_thinking":true})");
  EXPECT_TRUE(kwargs(parsed({})).empty());
  for (const auto& [value, message] : {std::pair{"[1]", "must be a JSON object"}, std::pair{"{bad", "not valid JSON"},
                                       std::pair{R"({"messages": []})", "cannot set \"messages\""},
                                       std::pair{R"({"add_generation_prompt": true})", "cannot set"}}) {
    const std::string e = testing::user_error([&] { parse_chat_template_kwargs(value, "--chat_template_kwargs"); });
    EXPECT_NE(e.find("--chat_template_kwargs"), std::string::npos) << e;
    EXPECT_NE(e.find(message), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace trlhpc
