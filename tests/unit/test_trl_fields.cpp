// Every argument of TRL's dataclasses (tests/fixtures/trl_fields.json, written from TRL 1.16 by
// tests/fixtures/make_trl_fields.py) is classified in src/cli/trl_fields_table.cpp, and none of them meets
// "unrecognised option": each at its TRL default is accepted on the command line and all together in one
// YAML; refused values name the field, the value and what to use instead; mapped ones do what they say.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/cli/trl_fields.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

nlohmann::json fixture() {
  std::ifstream in(testing::tests_dir() + "/fixtures/trl_fields.json");
  EXPECT_TRUE(in.good()) << "missing tests/fixtures/trl_fields.json (run tests/fixtures/make_trl_fields.py)";
  return nlohmann::json::parse(in);
}

SftConfig parsed(const std::vector<std::string>& args, std::vector<std::string>* notes = nullptr) {
  SftConfig config;
  SftOptionContext context{1, false};
  context.notes = notes;
  EXPECT_TRUE(parse_sft_options(args, config, nullptr, context));
  return config;
}

std::string error_of(const std::vector<std::string>& args) {
  SftConfig config;
  return testing::user_error([&] { parse_sft_options(args, config, nullptr, SftOptionContext{1, false}); });
}

// A default as TRL's argparse command line spells it: True/False, numbers, strings, JSON for lists.
std::string cli_form(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::string yaml_file(const std::string& text) {
  const std::string path = testing::make_temp_dir("trl_fields") + "/trl.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(TrlFields, EveryFieldAndOlderSpellingIsClassified) {
  const nlohmann::json table = fixture();
  EXPECT_EQ(table["versions"]["trl"], "1.16.0");
  size_t checked = 0;
  for (const char* list : {"fields", "older_spellings"})
    for (const auto& field : table[list]) {
      const std::string name = field["name"];
      EXPECT_NE(find_trl_field(name), nullptr) << name << " (" << list << ") has no entry in src/cli/trl_fields_table.cpp";
      ++checked;
    }
  EXPECT_GE(checked, 163u + 19u);
  // ... and the table holds nothing else, each name once.
  std::set<std::string> fixture_names, table_names;
  for (const char* list : {"fields", "older_spellings"})
    for (const auto& field : table[list]) fixture_names.insert(field["name"].get<std::string>());
  for (const TrlField& f : trl_fields()) {
    EXPECT_TRUE(table_names.insert(f.name).second) << f.name << " is in the table twice";
    EXPECT_TRUE(fixture_names.count(f.name)) << f.name << " is in the table but not in trl_fields.json";
    EXPECT_TRUE(std::string(f.accepted) == "*" || f.instead) << f.name << ": a refusable field must say what to use";
  }
}

// A field honored with every value must be a trlhpc option, or have an apply function: otherwise its
// value would be accepted and silently dropped.
TEST(TrlFields, HonoredFieldsReachTheConfig) {
  SftConfig config;
  std::string help;
  EXPECT_FALSE(parse_sft_options({"--help"}, config, &help, SftOptionContext{1, false}));
  for (const TrlField& f : trl_fields()) {
    if (f.handling != TrlHandling::honored || std::string(f.accepted) != "*" || f.apply) continue;
    EXPECT_NE(help.find("--" + std::string(f.name) + " "), std::string::npos) << f.name << " is not a trlhpc option";
  }
}

TEST(TrlFields, EveryDefaultIsAcceptedOnTheCommandLineAloneAndAllAtOnce) {
  std::vector<std::string> all;
  const nlohmann::json table = fixture();  // a named value: fixture()["fields"] would dangle in the loop
  for (const auto& field : table["fields"]) {
    if (field["default"].is_null()) continue;  // argparse cannot spell None
    const std::vector<std::string> args = {"--" + field["name"].get<std::string>(), cli_form(field["default"])};
    EXPECT_EQ(error_of(args), "") << args[0] << " " << args[1];
    all.insert(all.end(), args.begin(), args.end());
  }
  EXPECT_GT(all.size(), 200u);
  std::vector<std::string> notes;
  parsed(all, &notes);
  EXPECT_TRUE(notes.empty()) << notes.size() << " notes for TRL's defaults, the first: " << notes[0];
  EXPECT_EQ(error_of(all), "");
}

// A YAML as TRL writes a config out: every field, None as null. JSON values are YAML flow scalars.
TEST(TrlFields, YamlWithEveryFieldAtItsDefaultIsAccepted) {
  std::ostringstream yaml;
  const nlohmann::json table = fixture();
  for (const auto& field : table["fields"]) yaml << field["name"].get<std::string>() << ": " << field["default"].dump() << "\n";
  const SftConfig c = parsed({"--config", yaml_file(yaml.str())});
  EXPECT_EQ(c.output_dir, SftConfig{}.output_dir);  // null: trlhpc's default
  EXPECT_EQ(c.pad_to_multiple_of, 0);               // TRL's "auto" off Neuron: no multiple
  EXPECT_EQ(c.save_steps, 500);                     // TRL's default, given explicitly
  EXPECT_FALSE(c.bf16);                             // null
  EXPECT_TRUE(c.gradient_checkpointing);            // TRL 1.16's default
  EXPECT_EQ(c.completion_only_loss, "auto");        // null
}

TEST(TrlFields, RefusedValuesNameTheFieldTheValueAndWhatToUse) {
  std::string e = error_of({"--fp16"});
  EXPECT_NE(e.find("--fp16 'true'"), std::string::npos) << e;
  EXPECT_NE(e.find("use --bf16"), std::string::npos) << e;
  e = error_of({"--push_to_hub", "True"});
  EXPECT_NE(e.find("no network on compute nodes"), std::string::npos) << e;
  e = error_of({"--optim", "sgd"});
  EXPECT_NE(e.find("--optim 'sgd'"), std::string::npos) << e;
  EXPECT_NE(e.find("adamw_torch"), std::string::npos) << e;
  e = error_of({"--dtype", "float16"});
  EXPECT_NE(e.find("--dtype bfloat16 or --bf16"), std::string::npos) << e;
  e = error_of({"--torch_dtype", "float16"});  // the older spelling refuses the same way
  EXPECT_NE(e.find("--dtype 'float16'"), std::string::npos) << e;
  EXPECT_EQ(error_of({"--label_smoothing_factor", "0.0"}), "");  // TRL's default, another spelling
  EXPECT_EQ(error_of({"--optim", "adamw_torch_fused"}), "");
  // In a YAML file the refusal names the file and the line.
  const std::string yaml = yaml_file("max_steps: 4\nfp16: true\n");
  e = error_of({"--config", yaml});
  EXPECT_NE(e.find(yaml + ":2: --fp16 'true'"), std::string::npos) << e;
  e = error_of({"--config", yaml_file("fsdp: [full_shard, sometimes]\n")});
  EXPECT_NE(e.find(":1: --fsdp '[\"full_shard\",\"sometimes\"]': unknown FSDP option 'sometimes'"), std::string::npos) << e;
  // Misspelt names are still errors.
  EXPECT_NE(error_of({"--fp61"}).find("unrecognised"), std::string::npos);
  EXPECT_NE(error_of({"--config", yaml_file("fp61: true\n")}).find("unknown option 'fp61'"), std::string::npos);
}

TEST(TrlFields, MappedFieldsDoWhatTheySayAndSaySoOnce) {
  std::vector<std::string> notes;
  SftConfig c = parsed({"--max_seq_length", "99", "--torch_dtype", "bfloat16", "--attn_implementation",
                        "flash_attention_2", "--attn_implementation", "sdpa"},
                       &notes);
  EXPECT_EQ(c.max_length, 99);
  EXPECT_TRUE(c.bf16);
  EXPECT_EQ(notes.size(), 4u);  // max_seq_length, torch_dtype, dtype, attn_implementation (the last value)
  for (const std::string& n : notes) EXPECT_EQ(std::count(notes.begin(), notes.end(), n), 1) << n;
  EXPECT_FALSE(parsed({"--dtype", "bfloat16", "--bf16", "false"}).bf16);  // an explicit --bf16 wins
  EXPECT_FALSE(parsed({"--dtype", "float32"}).bf16);
  EXPECT_EQ(parsed({"--use_cpu"}).device, "cpu");
  EXPECT_EQ(parsed({"--no_cuda", "True"}).device, "cpu");
  EXPECT_EQ(parsed({"--use_cpu", "--device", "cuda"}).device, "cuda");
  EXPECT_EQ(parsed({"--save_steps", "5", "--save_strategy", "no"}).save_steps, 0);
  EXPECT_EQ(parsed({"--save_steps", "5", "--save_strategy", "steps"}).save_steps, 5);
  EXPECT_EQ(parsed({"--save_strategy", "epoch"}).save_strategy, "epoch");
  EXPECT_EQ(parsed({"--save_strategy", "best"}).save_strategy, "best");
  EXPECT_NE(error_of({"--save_strategy", "always"}).find("use steps, epoch, best or no"), std::string::npos);
  EXPECT_TRUE(parsed({"--load_best_model_at_end"}).load_best_model_at_end);
  EXPECT_EQ(parsed({"--metric_for_best_model", "eval_mean_token_accuracy"}).metric_for_best_model,
            "eval_mean_token_accuracy");
  EXPECT_EQ(parsed({"--greater_is_better", "True"}).greater_is_better, "true");
  EXPECT_EQ(parsed({"--greater_is_better", "false"}).greater_is_better, "false");
  EXPECT_EQ(parsed({"--config", yaml_file("greater_is_better: null\n")}).greater_is_better, "");
  EXPECT_NE(error_of({"--greater_is_better", "maybe"}).find("use true or false"), std::string::npos);
  EXPECT_EQ(parsed({"--logging_strategy", "epoch"}).logging_strategy, "epoch");
  EXPECT_EQ(parsed({"--logging_strategy", "no"}).logging_strategy, "no");
  EXPECT_NE(error_of({"--logging_strategy", "always"}).find("use steps, epoch or no"), std::string::npos);
  EXPECT_FALSE(parsed({"--train_sampling_strategy", "sequential"}).shuffle_dataset);
  EXPECT_EQ(parsed({"--pad_to_multiple_of=auto"}).pad_to_multiple_of, 0);
  EXPECT_EQ(parsed({"--pad_to_multiple_of", "64"}).pad_to_multiple_of, 64);
  EXPECT_EQ(parsed({"--ddp_bucket_cap_mb", "50"}).bucket_size_mb, 50);
  EXPECT_EQ(parsed({"--evaluation_strategy", "steps"}).eval_strategy, "steps");
  EXPECT_EQ(parsed({"--per_gpu_eval_batch_size", "3"}).per_device_eval_batch_size, 3);
  EXPECT_EQ(parsed({"--per_device_eval_batch_size", "5"}).per_device_eval_batch_size, 5);
  EXPECT_EQ(parsed({"--lr_scheduler_kwargs", "{\"min_lr_rate\": 0.1}"}).lr_scheduler_kwargs, "{\"min_lr_rate\": 0.1}");
  EXPECT_EQ(parsed({"--config", yaml_file("lr_scheduler_kwargs: {min_lr_rate: 0.1}\n")}).lr_scheduler_kwargs,
            "{\"min_lr_rate\":0.1}");
  EXPECT_EQ(parsed({"--label_smoothing_factor", "0.1"}).label_smoothing_factor, 0.1);
  EXPECT_EQ(parsed({"--loss_type", "dft"}).loss_type, "dft");
  EXPECT_EQ(parsed({"--data_seed", "7"}).data_seed, std::optional<uint64_t>(7));
  EXPECT_FALSE(parsed({"--data_seed", "None"}).data_seed.has_value());
  EXPECT_FALSE(parsed({}).data_seed.has_value());
  EXPECT_EQ(parsed({"--config", yaml_file("data_seed: 11\n")}).data_seed, std::optional<uint64_t>(11));
  EXPECT_NE(error_of({"--data_seed", "-3"}).find("--data_seed '-3': must be an integer >= 0"), std::string::npos);
  EXPECT_NE(error_of({"--data_seed", "4.5"}).find("must be an integer >= 0"), std::string::npos);
  EXPECT_TRUE(parsed({"--save_only_model"}).save_only_model);
  EXPECT_FALSE(parsed({"--save_only_model", "False"}).save_only_model);
  EXPECT_FALSE(parsed({}).save_only_model);
  EXPECT_EQ(parsed({"--fsdp", "full_shard auto_wrap"}).sharding, "zero3");  // cli/fsdp_config.hpp, test_fsdp_config
  EXPECT_TRUE(parsed({"--eval_on_start"}).eval_on_start);
  EXPECT_FALSE(parsed({"--eval_on_start", "false"}).eval_on_start);
  EXPECT_TRUE(parsed({"--logging_first_step"}).logging_first_step);
  EXPECT_FALSE(parsed({"--logging_first_step", "False"}).logging_first_step);
  EXPECT_TRUE(parsed({"--activation_checkpointing", "true", "--gradient_checkpointing", "false"}).gradient_checkpointing ==
              false);  // the last occurrence of the one option wins
  const SftConfig y = parsed({"--config", yaml_file("max_seq_length: 77\nreport_to: [tensorboard]\ndtype: bfloat16\n")});
  EXPECT_EQ(y.max_length, 77);
  EXPECT_EQ(y.report_to, "tensorboard");
  EXPECT_TRUE(y.bf16);
}

// docs/guide/trl-arguments.md holds the table as `trlhpc sft --help_trl_fields` prints it.
TEST(TrlFields, DocsShowTheTable) {
  std::ifstream in(testing::tests_dir() + "/../docs/guide/trl-arguments.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str(), begin = "<!-- trl-fields-table begin -->\n", end = "<!-- trl-fields-table end -->";
  const auto b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos);
  std::istringstream in_doc(doc.substr(b + begin.size(), e - b - begin.size())), in_table(trl_field_table_markdown());
  std::string doc_line, table_line;
  for (int line = 1; std::getline(in_table, table_line); ++line) {
    const bool more = static_cast<bool>(std::getline(in_doc, doc_line));
    ASSERT_TRUE(more && doc_line == table_line)
        << "table line " << line << " differs (regenerate it from `trlhpc sft --help_trl_fields`):\n  docs:  "
        << (more ? doc_line : "(missing)") << "\n  table: " << table_line;
  }
  EXPECT_FALSE(std::getline(in_doc, doc_line)) << "docs have more lines than the table: " << doc_line;
}

}  // namespace
}  // namespace trlhpc
