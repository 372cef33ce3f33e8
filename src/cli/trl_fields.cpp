// Applying the TRL-argument table (trl_fields.hpp): value comparison, older spellings, refusals, notes,
// and the Markdown rendering of docs/guide/trl-arguments.md.
#include "trlhpc/cli/trl_fields.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

std::vector<std::string> split_bars(const std::string& text) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {  // empty parts are kept: "|[]" accepts the empty string
    const auto bar = text.find('|', start);
    parts.push_back(text.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) return parts;
    start = bar + 1;
  }
}

// One spelling per value: Python's True/None, YAML's yes/~ and argparse's strings all arrive here.
std::string canonical(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "none" || v == "null" || v == "~") return "null";
  if (v == "true" || v == "yes" || v == "on") return "true";
  if (v == "false" || v == "no" || v == "off") return "false";
  return v;
}

bool as_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

bool same_value(const std::string& a, const std::string& b) {
  const std::string ca = canonical(a), cb = canonical(b);
  if (ca == cb) return true;
  double na = 0, nb = 0;
  const bool a_number = as_number(ca, na), b_number = as_number(cb, nb);
  if (a_number && b_number) return na == nb;
  // argparse-style booleans given as 1/0
  if (a_number && (cb == "true" || cb == "false")) return (na != 0) == (cb == "true");
  if (b_number && (ca == "true" || ca == "false")) return (nb != 0) == (ca == "true");
  return false;
}

const char* handling_name(TrlHandling h) {
  switch (h) {
    case TrlHandling::honored: return "honored";
    case TrlHandling::mapped: return "mapped";
    case TrlHandling::no_op: return "no-op";
    case TrlHandling::refused: return "refused";
  }
  return "";
}

// A Markdown table cell: a '|' inside would end it.
std::string cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.replace(at, 1, "\\|");
  return text;
}

std::string shown(const TrlField& field, const std::string& value) { return field.secret ? "(hidden)" : "'" + value + "'"; }

}  // namespace

const TrlField* find_trl_field(const std::string& name) {
  for (const TrlField& field : trl_fields())
    if (name == field.name) return &field;
  return nullptr;
}

bool trl_value_accepted(const std::string& accepted, const std::string& value) {
  if (accepted == "*") return true;
  for (const std::string& option : split_bars(accepted))
    if (same_value(option, value)) return true;
  return false;
}

std::vector<std::string> rewrite_trl_arguments(const std::vector<std::string>& args, std::vector<std::string>* notes) {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].rfind("--", 0) != 0) continue;
    const auto equals = out[i].find('=');
    std::string name = out[i].substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const TrlField* field = find_trl_field(name);
    if (field && field->rename_to) {
      if (notes) notes->push_back("--" + name + ": " + field->what + " (read as --" + field->rename_to + ")");
      name = field->rename_to;
      out[i] = "--" + name + (equals == std::string::npos ? "" : out[i].substr(equals));
      field = find_trl_field(name);
    }
    // `--local_rank -1`: a negative number is a value, but after an option with an implicit value (every
    // TRL-only field, so that `--fp16` alone means true) boost would read it as the short option -1.
    double number = 0;
    if (field && equals == std::string::npos && i + 1 < out.size() && out[i + 1].rfind('-', 0) == 0 &&
        as_number(out[i + 1], number)) {
      out[i] += "=" + out[i + 1];
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      --i;  // look at the merged token again (for its value aliases)
      continue;
    }
    if (!field || !field->value_aliases) continue;
    std::string* value = nullptr;
    std::string inline_value;
    if (equals != std::string::npos) inline_value = out[i].substr(out[i].find('=') + 1), value = &inline_value;
    else if (i + 1 < out.size() && out[i + 1].rfind("--", 0) != 0) value = &out[i + 1];
    if (!value) continue;
    for (const std::string& alias : split_bars(field->value_aliases)) {
      const auto eq = alias.find('=');
      if (same_value(alias.substr(0, eq), *value)) {
        *value = alias.substr(eq + 1);
        break;
      }
    }
    if (equals != std::string::npos) out[i] = "--" + name + "=" + inline_value;
  }
  return out;
}

void apply_trl_field(const TrlField& field, const std::string& value, const std::set<std::string>& explicit_flags,
                     SftConfig& config, std::vector<std::string>& notes) {
  if (!trl_value_accepted(field.accepted, value)) {
    const std::string accepted = field.handling == TrlHandling::refused ? " (only TRL's default is accepted)" : "";
    throw UserError("--" + std::string(field.name) + " " + shown(field, value) + ": " +
                    (field.instead ? field.instead : "not supported") + accepted);
  }
  if (field.apply) field.apply(value, explicit_flags, config);
  if (field.handling == TrlHandling::mapped && !(field.quiet && trl_value_accepted(field.quiet, value)))
    notes.push_back("--" + std::string(field.name) + " " + shown(field, value) + ": " + field.what);
}

std::string trl_field_table_markdown() {
  std::ostringstream os;
  os << "| field | handling | accepted values | what trlhpc does | otherwise |\n|---|---|---|---|---|\n";
  for (const TrlField& f : trl_fields()) {
    std::string accepted = f.accepted;
    std::replace(accepted.begin(), accepted.end(), '|', ',');
    std::string what = f.what;
    if (f.rename_to) what += std::string(what.empty() ? "" : "; ") + "read as --" + f.rename_to;
    if (f.handling == TrlHandling::refused && what.empty()) what = "not available";
    os << "| `" << f.name << "` | " << handling_name(f.handling) << " | " << (accepted == "*" ? "any" : "`" + accepted + "`")
       << " | " << cell(what) << " | " << cell(f.instead ? f.instead : "") << " |\n";
  }
  return os.str();
}

}  // namespace trlhpc
