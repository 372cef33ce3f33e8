#pragma once
// Hub ids ("Qwen/Qwen3-0.6B", "trl-lib/Capybara") resolved offline, from the Hugging Face cache that
// `huggingface-cli download` fills on a login node. trlhpc never opens a network connection.
//
// The layout is the one huggingface_hub documents (guides/manage-cache):
//   <cache>/models--Qwen--Qwen3-0.6B/refs/main          text file holding a commit sha
//   <cache>/models--Qwen--Qwen3-0.6B/snapshots/<sha>/   the repo's files (symlinks into ../../blobs/, or copies)
//   <cache>/datasets--trl-lib--Capybara/...             same for datasets
// A revision is a ref (branch or tag name, refs/<revision>) or a commit sha (snapshots/<sha>).
// As in transformers and `datasets`, a local file or folder of the given name wins over the cache.
#include <string>
#include <vector>

namespace trlhpc::hub {

enum class RepoType { kModel, kDataset };

// The cache folder huggingface_hub uses: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
// Pure: the caller passes the variables (null or empty = unset), so the library reads no environment.
std::string cache_dir_from(const char* hf_hub_cache, const char* hf_home, const char* home);
// cache_dir_from with this process's environment: the one place that reads it (called by the CLI).
std::string cache_dir_from_environment();

// True when `name` has the shape of a hub id: "name" or "org/name", each part of letters, digits,
// '-', '_', '.', not starting or ending with '-' or '.', no "..", no "--" (huggingface_hub's
// validate_repo_id). Absolute and ./relative paths are never ids.
bool looks_like_repo_id(const std::string& name);

// "models--Qwen--Qwen3-0.6B" / "datasets--trl-lib--Capybara" (huggingface_hub's repo_folder_name).
std::string repo_folder_name(const std::string& repo_id, RepoType type);

// The snapshot folder of repo_id at revision in cache_dir, or "" when the cache does not hold it.
// `searched` (optional) receives every path looked at, for the error message.
std::string find_snapshot(const std::string& cache_dir, const std::string& repo_id, RepoType type,
                          const std::string& revision, std::vector<std::string>* searched = nullptr);

// What --model_name_or_path / --dataset_name NAME stands for: NAME itself when it exists on disk; else,
// for a hub id, its snapshot folder in the cache. UserError naming `option` otherwise: the paths searched
// and the `huggingface-cli download` command (run where there is network) that fetches it.
std::string resolve(const std::string& name, RepoType type, const std::string& revision,
                    const std::string& cache_dir, const std::string& option);

}  // namespace trlhpc::hub
