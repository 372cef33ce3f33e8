// Hub ids resolved offline in a Hugging Face cache: the committed fixture laid out by huggingface_hub
// itself (tests/fixtures/make_hub_cache_fixture.py), plus copied-file layouts and the missing-id error.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"
#include "trlhpc/cli/hub_names.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hub_cache.hpp"

namespace trlhpc::hub {
namespace {

namespace fs = std::filesystem;

std::string fixture_cache() { return testing::tests_dir() + "/fixtures/hub_cache"; }

nlohmann::json expected_shas() {
  std::ifstream in(fixture_cache() + "/expected.json");
  return nlohmann::json::parse(in);
}

using trlhpc::testing::user_error;

TEST(HubCache, CacheDirFollowsHuggingfaceHubPrecedence) {
  EXPECT_EQ(cache_dir_from("/a/hub", "/b", "/home/u"), "/a/hub");
  EXPECT_EQ(cache_dir_from(nullptr, "/b", "/home/u"), "/b/hub");
  EXPECT_EQ(cache_dir_from("", "", "/home/u"), "/home/u/.cache/huggingface/hub");
}

TEST(HubCache, RepoIdsAndFolderNames) {
  EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3-0.6B"));
  EXPECT_TRUE(looks_like_repo_id("gpt2"));
  EXPECT_FALSE(looks_like_repo_id("/abs/path"));
  EXPECT_FALSE(looks_like_repo_id("./rel"));
  EXPECT_FALSE(looks_like_repo_id("a/b/c"));
  EXPECT_FALSE(looks_like_repo_id("../x"));
  EXPECT_FALSE(looks_like_repo_id("a--b/c"));
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-0.6B", RepoType::kModel), "models--Qwen--Qwen3-0.6B");
  EXPECT_EQ(repo_folder_name("trl-lib/Capybara", RepoType::kDataset), "datasets--trl-lib--Capybara");
}

TEST(HubCache, FixtureResolvesModelByBranchTagAndSha) {
  const auto shas = expected_shas();
  const std::string repo = fixture_cache() + "/models--trlhpc-test--tiny-qwen2/snapshots/";
  EXPECT_EQ(resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, "main", fixture_cache(), "--model_name_or_path"),
            repo + shas["main"].get<std::string>());
  EXPECT_EQ(resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, "v1", fixture_cache(), "--model_name_or_path"),
            repo + shas["v1"].get<std::string>());
  const std::string sha = shas["v1"];
  EXPECT_EQ(resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, sha, fixture_cache(), "--model_name_or_path"), repo + sha);
  // Snapshot entries are relative symlinks into blobs/: they must open.
  EXPECT_TRUE(fs::is_regular_file(repo + sha + "/config.json"));
}

TEST(HubCache, FixtureResolvesDatasets) {
  const auto shas = expected_shas();
  EXPECT_EQ(resolve("trlhpc-test/tiny-chat", RepoType::kDataset, "main", fixture_cache(), "--dataset_name"),
            fixture_cache() + "/datasets--trlhpc-test--tiny-chat/snapshots/" + shas["dataset"].get<std::string>());
  // A model id is not a dataset id: models--X and datasets--X are different folders.
  EXPECT_NE(user_error([&] { resolve("trlhpc-test/tiny-qwen2", RepoType::kDataset, "main", fixture_cache(), "--dataset_name"); }), "");
}

TEST(HubCache, CopiesInsteadOfSymlinksResolveToo) {
  // huggingface_hub copies files when the file system has no symlinks (Windows, some network mounts).
  const std::string cache = testing::make_temp_dir("hub_copies");
  const fs::path repo = fs::path(cache) / "models--org--m";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "abc123");
  std::ofstream(repo / "refs" / "main") << "abc123";  // no trailing newline, as huggingface_hub writes it
  std::ofstream(repo / "snapshots" / "abc123" / "config.json") << "{}";
  EXPECT_EQ(resolve("org/m", RepoType::kModel, "main", cache, "--model_name_or_path"), (repo / "snapshots" / "abc123").string());
  fs::remove_all(cache);
}

TEST(HubCache, LocalFolderOfTheSameNameWins) {
  const std::string dir = testing::make_temp_dir("hub_local");
  const fs::path local = fs::path(dir) / "trlhpc-test" / "tiny-qwen2";
  fs::create_directories(local);
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  EXPECT_EQ(resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, "main", fixture_cache(), "--model_name_or_path"),
            "trlhpc-test/tiny-qwen2");
  fs::current_path(old);
  fs::remove_all(dir);
}

TEST(HubCache, MissingIdSaysWhereItLookedAndHowToDownload) {
  const std::string msg = user_error([&] {
    resolve("Qwen/Qwen2.5-0.5B", RepoType::kModel, "main", fixture_cache(), "--model_name_or_path");
  });
  EXPECT_NE(msg.find("--model_name_or_path Qwen/Qwen2.5-0.5B"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fixture_cache() + "/models--Qwen--Qwen2.5-0.5B/refs/main"), std::string::npos) << msg;
  EXPECT_NE(msg.find("huggingface-cli download Qwen/Qwen2.5-0.5B"), std::string::npos) << msg;
  const std::string data = user_error([&] {
    resolve("trl-lib/Capybara", RepoType::kDataset, "main", fixture_cache(), "--dataset_name");
  });
  EXPECT_NE(data.find("huggingface-cli download trl-lib/Capybara --repo-type dataset"), std::string::npos) << data;
  const std::string rev = user_error([&] {
    resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, "v9", fixture_cache(), "--model_name_or_path");
  });
  EXPECT_NE(rev.find("--revision v9"), std::string::npos) << rev;
  EXPECT_NE(user_error([&] { resolve("trlhpc-test/tiny-qwen2", RepoType::kModel, "../../x", fixture_cache(), "--m"); }), "");
  EXPECT_NE(user_error([&] { resolve("/no/such/dir", RepoType::kModel, "main", fixture_cache(), "--m"); }).find("no such file"),
            std::string::npos);
}

TEST(HubCache, SftConfigNamesResolved) {
  SftConfig c;
  c.model_name_or_path = "trlhpc-test/tiny-qwen2";
  c.model_revision = "v1";
  c.dataset_name = "trlhpc-test/tiny-chat";
  resolve_hub_names(c, fixture_cache());
  EXPECT_EQ(fs::path(c.model_name_or_path).filename(), expected_shas()["v1"].get<std::string>());
  EXPECT_TRUE(fs::is_directory(c.dataset_name));
}

TEST(HubCache, MixtureEntryPathsResolveAndDatasetConfigWaits) {
  SftConfig c;
  c.dataset_name = "trlhpc-test/not-cached";  // ignored next to a mixture (TRL's rule), so not resolved
  c.dataset_config = "en";                    // chosen when the dataset is read (dataset_source.hpp)
  dataset::DatasetEntry e;
  e.path = "trlhpc-test/tiny-chat";
  e.origin = "mix.yaml: datasets[0] (path: trlhpc-test/tiny-chat)";
  c.datasets.push_back(e);
  resolve_hub_names(c, fixture_cache());
  EXPECT_TRUE(fs::is_directory(c.datasets[0].path)) << c.datasets[0].path;
  EXPECT_EQ(c.dataset_name, "trlhpc-test/not-cached");
  EXPECT_EQ(c.dataset_config, "en");
  c.datasets[0].path = "trlhpc-test/missing";
  EXPECT_NE(user_error([&] { resolve_hub_names(c, fixture_cache()); }).find("mix.yaml: datasets[0]"), std::string::npos);
}

}  // namespace
}  // namespace trlhpc::hub
