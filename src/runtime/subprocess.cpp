#include "trlhpc/runtime/subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trlhpc/core/error.hpp"

extern char** environ;

namespace trlhpc {

namespace {
// Both ends of a pipe, closed on destruction.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC) != 0) throw RuntimeFailure(std::string("pipe2: ") + std::strerror(errno));
  }
  ~Pipe() {
    close_end(0);
    close_end(1);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
};

struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
};
}  // namespace

std::optional<ProgramResult> run_program(const std::vector<std::string>& argv) {
  TRLHPC_ASSERT(!argv.empty(), "run_program needs a program name");
  Pipe output;
  SpawnActions spawn;
  posix_spawn_file_actions_adddup2(&spawn.actions, output.fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&spawn.actions, output.fd[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&spawn.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0].c_str(), &spawn.actions, nullptr, args.data(), environ);
  if (spawned == ENOENT) return std::nullopt;
  if (spawned != 0) throw RuntimeFailure("cannot start " + argv[0] + ": " + std::strerror(spawned));
  output.close_end(1);  // the child holds its copy; EOF arrives when it exits
  ProgramResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(output.fd[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw RuntimeFailure(std::string("waitpid: ") + std::strerror(errno));
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace trlhpc
