#include "run/proc.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gm::run {
namespace {

// Forks argv; in the child, `out_fd` (when >= 0) becomes stdout and stderr. Returns the
// wait status, or an error when the child could not be started or waited for.
Result<int> spawn(const std::string& step, const std::vector<std::string>& argv, int out_fd) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::errorf("{}: cannot start {}: {}", step, argv[0], std::strerror(errno));
  if (pid == 0) {
    if (out_fd >= 0 && (::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0)) ::_exit(126);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "gamma: error: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Status::errorf("{}: waitpid: {}", step, std::strerror(errno));
  return status;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with {}", WEXITSTATUS(status));
}

bool success(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

Status run_step(const std::string& step, const std::vector<std::string>& argv) {
  GAMMA_ASSIGN_OR_RETURN(int status, spawn(step, argv, -1));
  if (success(status)) return Status::ok();
  return Status::errorf("{} failed ({} {})", step, argv[0], describe(status));
}

Status run_tool(const std::string& step, const std::vector<std::string>& argv, const std::string& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf("{}: cannot write {}: {}", step, log, std::strerror(errno));
  auto status = spawn(step, argv, fd);
  ::close(fd);
  if (!status.is_ok()) return status.status();
  if (success(*status)) return Status::ok();
  return Status::errorf("{} failed ({} {}; its log: {})", step, argv[0], describe(*status), log);
}

Result<std::string> capture(const std::vector<std::string>& argv) {
  char path[] = "/tmp/gamma-capture-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return Status::errorf("cannot create a temporary file: {}", std::strerror(errno));
  ::unlink(path);  // the descriptor keeps it until closed
  auto status = spawn(argv[0], argv, fd);
  std::string out;
  if (status.is_ok()) {
    ::lseek(fd, 0, SEEK_SET);
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  }
  ::close(fd);
  if (!status.is_ok()) return status.status();
  if (!success(*status)) return Status::errorf("{} {}", argv[0], describe(*status));
  return out;
}

}  // namespace gm::run
