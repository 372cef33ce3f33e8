#pragma once
// Every argument `trl sft` parses, and what `trlhpc sft` does with it (issue 42; docs/guide/trl-arguments.md).
//
// The fields of TRL's SFTConfig (with transformers' TrainingArguments), ModelConfig, ScriptArguments and
// DatasetMixtureConfig, plus the older spellings of earlier TRL / transformers releases, are listed in
// tests/fixtures/trl_fields.json (written from the installed TRL by tests/fixtures/make_trl_fields.py).
// Each has one entry in the table of trl_fields.cpp, classified as
//   honored  the same meaning as in TRL (most are trlhpc's own options, described in --help)
//   mapped   trlhpc does something equivalent, or the field is another spelling of one of its options;
//            a note saying what is printed once (rank 0) when the field is given
//   no_op    TRL's meaning has no effect here (a progress bar, a DataLoader worker setting, a hub
//            setting of a push that cannot happen): accepted with any value
//   refused  not available: TRL's default value (the `accepted` list) is accepted, any other value is
//            a UserError naming the field, the value and what to use instead
// so a TRL command line or a YAML that TRL wrote out with every field at its default never meets
// "unrecognised option". Honored and mapped fields may refuse values too (optim sgd, dtype float16).
#include <set>
#include <string>
#include <vector>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

enum class TrlHandling { honored, mapped, no_op, refused };

// Applies a mapped field's value to the config (nullptr: the note alone says it all). `explicit_flags`
// holds trlhpc options given explicitly, which a mapping must not override.
using TrlApply = void (*)(const std::string& value, const std::set<std::string>& explicit_flags, SftConfig& config);

struct TrlField {
  const char* name;
  TrlHandling handling;
  // Values handled as `handling` says, '|'-separated, compared after normalisation (true/True/1 alike,
  // null/None/~ alike, numbers by value); "*": every value.
  const char* accepted;
  const char* what;     // what trlhpc does with it: the --help_trl_fields line, and a mapped field's note
  const char* instead;  // for a value outside `accepted`: what to use instead (nullptr when `accepted` is "*")
  const char* rename_to = nullptr;      // another spelling of this trlhpc option (max_seq_length -> max_length)
  const char* value_aliases = nullptr;  // TRL values of a trlhpc option rewritten to trlhpc's: "auto=0|none=0"
  TrlApply apply = nullptr;
  bool secret = false;  // never echoed in messages (hub_token)
  // A mapped field's values that change nothing (TRL's default, trlhpc's behaviour): no note for them,
  // so a YAML with every field at its default runs without a page of notes.
  const char* quiet = nullptr;
};

// The table, in the order of tests/fixtures/trl_fields.json.
const std::vector<TrlField>& trl_fields();

// The entry of `name`, or nullptr.
const TrlField* find_trl_field(const std::string& name);

// True when `value` is one of the '|'-separated `accepted` values after normalisation.
bool trl_value_accepted(const std::string& accepted, const std::string& value);

// Renames older spellings (--max_seq_length -> --max_length) and rewrites TRL value spellings of trlhpc
// options (--pad_to_multiple_of auto -> 0), in both the `--name value` and the `--name=value` forms.
// A renamed spelling adds its note to `notes` (when given).
std::vector<std::string> rewrite_trl_arguments(const std::vector<std::string>& args,
                                               std::vector<std::string>* notes = nullptr);

// Checks one given value of a field that is not a trlhpc option (UserError naming the field, the value
// and what to use instead), applies it and appends a mapped field's note to `notes`.
void apply_trl_field(const TrlField& field, const std::string& value, const std::set<std::string>& explicit_flags,
                     SftConfig& config, std::vector<std::string>& notes);

// The table as the Markdown of docs/guide/trl-arguments.md (`trlhpc sft --help_trl_fields`).
std::string trl_field_table_markdown();

}  // namespace trlhpc
