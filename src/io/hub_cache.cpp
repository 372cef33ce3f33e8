// Offline resolution of hub ids through the Hugging Face cache (see hub_cache.hpp).
#include "trlhpc/io/hub_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc::hub {
namespace {

namespace fs = std::filesystem;

bool set(const char* v) { return v != nullptr && *v != '\0'; }

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool valid_id_part(const std::string& part) {
  if (part.empty() || part.size() > 96) return false;
  for (char c : part)
    if (!id_char(c)) return false;
  if (part.front() == '-' || part.front() == '.' || part.back() == '-' || part.back() == '.') return false;
  return part.find("..") == std::string::npos && part.find("--") == std::string::npos;
}

// A revision names a file under refs/ or a folder under snapshots/: it must not climb out of them.
bool safe_revision(const std::string& revision) {
  if (revision.empty() || revision.front() == '/' || revision.find('\\') != std::string::npos) return false;
  for (const auto& part : fs::path(revision))
    if (part == ".." || part == ".") return false;
  return true;
}

std::string trimmed(std::string s) {
  const char* space = " \t\r\n";
  s.erase(0, s.find_first_not_of(space));
  s.erase(s.find_last_not_of(space) + 1);
  return s;
}

const char* type_word(RepoType type) { return type == RepoType::kModel ? "model" : "dataset"; }

}  // namespace

std::string cache_dir_from(const char* hf_hub_cache, const char* hf_home, const char* home) {
  if (set(hf_hub_cache)) return hf_hub_cache;
  if (set(hf_home)) return (fs::path(hf_home) / "hub").string();
  return (fs::path(set(home) ? home : "/") / ".cache" / "huggingface" / "hub").string();
}

std::string cache_dir_from_environment() {
  return cache_dir_from(std::getenv("HF_HUB_CACHE"), std::getenv("HF_HOME"), std::getenv("HOME"));
}

bool looks_like_repo_id(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return valid_id_part(name);
  if (name.find('/', slash + 1) != std::string::npos) return false;
  return valid_id_part(name.substr(0, slash)) && valid_id_part(name.substr(slash + 1));
}

std::string repo_folder_name(const std::string& repo_id, RepoType type) {
  std::string folder = type == RepoType::kModel ? "models" : "datasets";
  std::string rest = repo_id;
  for (size_t at = rest.find('/'); at != std::string::npos; at = rest.find('/', at + 2)) rest.replace(at, 1, "--");
  return folder + "--" + rest;
}

std::string find_snapshot(const std::string& cache_dir, const std::string& repo_id, RepoType type,
                          const std::string& revision, std::vector<std::string>* searched) {
  if (!looks_like_repo_id(repo_id) || !safe_revision(revision)) return "";
  const fs::path repo = fs::path(cache_dir) / repo_folder_name(repo_id, type);
  std::error_code ec;
  // A ref (branch, tag, refs/pr/N) names the commit in a one-line file.
  const fs::path ref = repo / "refs" / revision;
  if (searched) searched->push_back(ref.string());
  if (fs::is_regular_file(ref, ec)) {
    std::ifstream in(ref);
    std::string sha;
    std::getline(in, sha);
    sha = trimmed(sha);
    if (!sha.empty() && safe_revision(sha) && sha.find('/') == std::string::npos) {
      const fs::path snapshot = repo / "snapshots" / sha;
      if (searched) searched->push_back(snapshot.string());
      if (fs::is_directory(snapshot, ec)) return snapshot.string();
    }
  }
  // A commit sha (or a ref huggingface_hub never wrote down) names the snapshot folder itself.
  const fs::path snapshot = repo / "snapshots" / revision;
  if (searched) searched->push_back(snapshot.string());
  if (fs::is_directory(snapshot, ec)) return snapshot.string();
  return "";
}

std::string resolve(const std::string& name, RepoType type, const std::string& revision, const std::string& cache_dir,
                    const std::string& option) {
  std::error_code ec;
  if (!name.empty() && fs::exists(name, ec)) return name;  // a local folder or file wins, as in transformers
  TRLHPC_REQUIRE(!name.empty(), option + " is empty: pass a local path or a hub id such as Qwen/Qwen3-0.6B");
  std::ostringstream msg;
  msg << option << " " << name << ": ";
  if (!looks_like_repo_id(name)) {
    msg << "no such file or folder (and not a hub id of the form ORG/NAME). Check the path";
    throw UserError(msg.str());
  }
  if (!safe_revision(revision)) {
    msg << "revision '" << revision << "' is not a branch, tag or commit sha";
    throw UserError(msg.str());
  }
  std::vector<std::string> searched;
  const std::string snapshot = find_snapshot(cache_dir, name, type, revision, &searched);
  if (!snapshot.empty()) return snapshot;
  msg << "not a local path, and the Hugging Face cache " << cache_dir << " has no " << type_word(type) << " "
      << name << " at revision " << revision << " (searched ./" << name;
  for (const std::string& path : searched) msg << ", " << path;
  msg << "). trlhpc works offline: on a machine with network run\n  huggingface-cli download " << name;
  if (type == RepoType::kDataset) msg << " --repo-type dataset";
  if (revision != "main") msg << " --revision " << revision;
  msg << "\nwith the same HF_HUB_CACHE / HF_HOME (cache: $HF_HUB_CACHE, else $HF_HOME/hub, else "
         "~/.cache/huggingface/hub), then rerun";
  throw UserError(msg.str());
}

}  // namespace trlhpc::hub
