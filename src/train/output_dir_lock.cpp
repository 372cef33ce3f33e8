#include "trlhpc/train/output_dir_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace fs = std::filesystem;
namespace {

std::string this_host() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown-host";
  return host;
}

// The scheduler's job id, so a user sees which job holds the folder (squeue -j).
std::string job_id() {
  for (const char* name : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"})
    if (const char* v = std::getenv(name)) return v;
  return "-";
}

// Creates `path` exclusively with our identity; false when it exists.
bool create_exclusive(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    const int error = errno;
    if (error == EACCES || error == EROFS || error == EPERM)
      throw UserError("--output_dir " + fs::path(path).parent_path().string() + " is not writable (" +
                      std::strerror(error) + "): choose a writable --output_dir");
    throw RuntimeFailure(rank_prefix() + "cannot create the lock " + path + ": " + std::strerror(error));
  }
  std::ostringstream text;
  text << this_host() << ' ' << ::getpid() << ' ' << job_id() << ' ' << std::time(nullptr) << '\n';
  const std::string s = text.str();
  const bool written = ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  ::close(fd);
  if (!written) throw RuntimeFailure(rank_prefix() + "cannot write the lock " + path + " (disk full?)");
  return true;
}

// Whether process `pid` of this host is still running: a zombie (dead, not yet reaped) is not.
bool process_alive(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;  // no /proc: kill() said it exists
  const size_t paren = text.rfind(')');        // "pid (comm) S ...": comm may hold spaces
  return !(paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z');
}

// A run killed by its launcher (kill -9 of a rank, then mpirun ends the others) may still be exiting
// when the next command (a resume) starts: give this host's holder kHolderGraceSeconds to go away.
constexpr double kHolderGraceSeconds = 15;

bool holder_gone(long pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kHolderGraceSeconds);
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

}  // namespace

OutputDirLock::OutputDirLock(const std::string& output_dir) : path_((fs::path(output_dir) / ".trlhpc.lock").string()) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec && !fs::is_directory(output_dir))
    throw UserError("--output_dir " + output_dir + " cannot be created (" + ec.message() + "): choose a writable folder");
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (create_exclusive(path_)) return;
    std::ifstream in(path_);
    std::string host, pid_text, job, started;
    in >> host >> pid_text >> job >> started;
    char* end = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    const bool parsed = !pid_text.empty() && end && *end == '\0' && pid > 0;
    // Same host and no such process: the holder died without removing it (kill -9, a node reboot).
    if (parsed && host == this_host() && holder_gone(pid)) {
      replaced_stale_ = "host " + host + ", pid " + pid_text + ", job " + job;
      fs::remove(path_, ec);
      continue;
    }
    throw UserError("--output_dir " + output_dir + " is in use by another run (host " + host + ", pid " + pid_text +
                    ", job " + job + ", lock " + path_ +
                    "): wait for it, choose another --output_dir, or remove the lock file if that run is gone");
  }
  throw RuntimeFailure(rank_prefix() + "cannot take the lock " + path_ + ": it reappeared while replacing a stale one");
}

OutputDirLock::~OutputDirLock() {
  std::error_code ec;
  fs::remove(path_, ec);  // best effort: a leftover is detected as stale by the next run on this host
}

}  // namespace trlhpc
