// Split inference and data_files globs, as Hugging Face `datasets` does them (data_files.hpp).
#include "trlhpc/data/dataset/data_files.hpp"

#include <algorithm>
#include <array>
#include <regex>
#include <set>

#include "trlhpc/core/error.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;

// fnmatch of one '[...]' class at pattern[at] (at points past '['): sets `end` to the index after ']'.
// Returns false (and end = npos) when the class is unterminated, so the '[' is a literal.
bool class_matches(std::string_view pattern, size_t at, char c, size_t& end) {
  bool negate = false;
  if (at < pattern.size() && pattern[at] == '!') {
    negate = true;
    ++at;
  }
  bool matched = false;
  size_t i = at;
  for (bool first = true; i < pattern.size() && (first || pattern[i] != ']'); first = false) {
    const char lo = pattern[i];
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      matched |= lo <= c && c <= pattern[i + 2];
      i += 3;
    } else {
      matched |= lo == c;
      ++i;
    }
  }
  if (i >= pattern.size()) {
    end = std::string_view::npos;
    return false;
  }
  end = i + 1;
  return matched != negate;
}

// One path segment against one pattern segment: '*' any run, '?' one character, classes. The usual
// two-pointer walk with one backtrack point for the last '*' (linear in practice, quadratic at worst).
bool segment_matches(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      while (p < pattern.size() && pattern[p] == '*') ++p;
      star_p = p;
      star_t = t;
      continue;
    }
    if (p < pattern.size()) {
      size_t end = 0;
      if (pattern[p] == '[') {
        const bool ok = class_matches(pattern, p + 1, text[t], end);
        if (end != std::string_view::npos) {
          if (ok) {
            p = end;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {
          ++p;
          ++t;
          continue;
        }
      } else if (pattern[p] == '?' || pattern[p] == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') {
      out.push_back(path.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

bool is_hidden_or_special(const fs::path& relative) {
  for (const auto& part : relative) {
    const std::string name = part.string();
    if ((!name.empty() && name[0] == '.') || name.rfind("__", 0) == 0) return true;
  }
  return false;
}

bool is_ignored_name(const std::string& name) {
  static const std::array<const char*, 6> kIgnored = {"README.md",          "config.json",       "dataset_info.json",
                                                      "dataset_infos.json", "dummy_data.zip",    "dataset_dict.json"};
  for (const char* ignored : kIgnored)
    if (name == ignored) return true;
  return false;
}

bool has_wildcard(const std::string& pattern) { return pattern.find_first_of("*?[") != std::string::npos; }

struct KeywordSplit {
  const char* split;
  std::vector<const char*> keywords;
};

const std::vector<KeywordSplit>& keyword_splits() {
  static const std::vector<KeywordSplit> splits = {{"train", {"train", "training"}},
                                                   {"validation", {"validation", "valid", "dev", "val"}},
                                                   {"test", {"test", "testing", "eval", "evaluation"}}};
  return splits;
}

constexpr const char* kSep = "[-._ 0-9]";

std::vector<std::string> keyword_patterns(const char* keyword, bool in_folder_name) {
  const std::string k = keyword, s = kSep;
  if (in_folder_name) return {"**/" + k + "/**", "**/" + k + s + "*/**", "**/*" + s + k + "/**", "**/*" + s + k + s + "*/**"};
  return {"**/" + k + s + "*", "**/*" + s + k + s + "*"};
}

std::vector<std::string> matches(const std::vector<std::string>& files, const std::string& pattern) {
  std::vector<std::string> out;
  for (const std::string& f : files)
    if (glob_matches(pattern, f)) out.push_back(f);
  return out;
}

// Rule 1: data/SPLIT-NNNNN-of-NNNNN*.* . The split is the longest prefix of the file name followed by
// "-NNNNN-of-NNNNN" (datasets' string_to_dict takes the greedy match).
std::vector<SplitFiles> sharded_splits(const std::vector<std::string>& files, const std::string& origin) {
  static const std::regex shard(R"(^data/(.+)-[0-9]{5}-of-[0-9]{5}[^/]*\.[^/]*$)");
  static const std::regex split_name(R"(^\w+(\.\w+)*$)");
  std::set<std::string> names;
  for (const std::string& f : files) {
    std::smatch m;
    if (std::regex_match(f, m, shard) && m[1].str().find('/') == std::string::npos) names.insert(m[1].str());
  }
  if (names.empty()) return {};
  for (const std::string& name : names)
    if (!std::regex_match(name, split_name))
      throw UserError(origin + ": the shard data/" + name + "-NNNNN-of-NNNNN names the split \"" + name +
                      "\", which is not a valid split name (letters, digits, '_', dots between words); rename the shards");
  std::vector<std::string> ordered;
  for (const auto& ks : keyword_splits())
    if (names.count(ks.split)) ordered.push_back(ks.split);
  for (const std::string& name : names)
    if (std::find(ordered.begin(), ordered.end(), name) == ordered.end()) ordered.push_back(name);
  std::vector<SplitFiles> out;
  for (const std::string& name : ordered)
    out.push_back({name, matches(files, "data/" + name + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*")});
  return out;
}

std::vector<SplitFiles> keyword_splits_of(const std::vector<std::string>& files, bool in_folder_name) {
  std::vector<SplitFiles> out;
  for (const auto& ks : keyword_splits()) {
    SplitFiles split{ks.split, {}};
    for (const char* keyword : ks.keywords)
      for (const std::string& pattern : keyword_patterns(keyword, in_folder_name)) {
        std::vector<std::string> found = matches(files, pattern);
        split.files.insert(split.files.end(), found.begin(), found.end());
      }
    if (!split.files.empty()) out.push_back(std::move(split));
  }
  return out;
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view path) {
  const std::vector<std::string_view> p = segments(pattern), s = segments(path);
  // reachable[i][j]: pattern segments [i..) can match path segments [j..). Filled backwards: O(P*S).
  const size_t P = p.size(), S = s.size();
  std::vector<char> can((P + 1) * (S + 1), 0);
  auto at = [&](size_t i, size_t j) -> char& { return can[i * (S + 1) + j]; };
  at(P, S) = 1;
  for (size_t i = P; i-- > 0;)
    for (size_t j = S + 1; j-- > 0;) {
      if (p[i] == "**" && i + 1 == P)  // a trailing "**" stands for what lies under a folder: 1+ segments
        at(i, j) = j < S;
      else if (p[i] == "**")
        at(i, j) = at(i + 1, j) || (j < S && at(i, j + 1));
      else
        at(i, j) = j < S && segment_matches(p[i], s[j]) && at(i + 1, j + 1);
    }
  return at(0, 0) != 0;
}

std::vector<std::string> dataset_folder_files(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw UserError("dataset folder " + root.string() + " cannot be listed: " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw UserError("dataset folder " + root.string() + " cannot be listed: " + ec.message());
    // Lexically: fs::relative would follow a Hub cache snapshot's symlinks into ../../blobs/.
    const fs::path rel = it->path().lexically_relative(root);
    std::error_code entry_ec;  // a dangling or looping link is no data file, not an error
    if (is_hidden_or_special(rel)) {
      if (it->is_directory(entry_ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(entry_ec) || is_ignored_name(rel.filename().string())) continue;
    if (out.size() == kMaxDatasetFiles)
      throw UserError("dataset folder " + root.string() + " holds more than " + std::to_string(kMaxDatasetFiles) +
                      " files; point --dataset_name (or data_files) at the data itself");
    out.push_back(rel.generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> select_data_files(const std::vector<std::string>& files, const std::vector<std::string>& patterns,
                                           const std::string& origin) {
  std::vector<std::string> out;
  for (const std::string& pattern : patterns) {
    const fs::path as_path(pattern);
    bool climbs = false;
    for (const auto& part : as_path) climbs |= part == "..";
    if (pattern.empty() || pattern.size() > kMaxPatternLength || as_path.is_absolute() || climbs)
      throw UserError(origin + ": data_files pattern \"" + pattern.substr(0, 80) +
                      "\" must be a non-empty path relative to the dataset folder, without \"..\", at most " +
                      std::to_string(kMaxPatternLength) + " bytes");
    std::vector<std::string> found = matches(files, pattern);
    if (found.empty() && !has_wildcard(pattern))
      throw UserError(origin + ": data_files names " + pattern + ", which is not a file of the dataset folder");
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<SplitFiles> infer_splits(const std::vector<std::string>& files, const std::string& origin) {
  if (files.empty()) return {};
  if (auto sharded = sharded_splits(files, origin); !sharded.empty()) return sharded;
  if (auto by_folder = keyword_splits_of(files, true); !by_folder.empty()) return by_folder;
  if (auto by_name = keyword_splits_of(files, false); !by_name.empty()) return by_name;
  return {{"train", files}};
}

bool is_readable_data_file(std::string_view path) {
  const std::string ext = fs::path(std::string(path)).extension().string();
  return ext == ".jsonl" || ext == ".json" || ext == ".parquet";
}

}  // namespace trlhpc::dataset
