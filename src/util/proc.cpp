#include "util/proc.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gm {

Result<int> spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  if (argv.empty()) return Status::error("spawn: no command");
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A failed exec sends its errno through this close-on-exec pipe, so the caller's one line
  // says "cannot run X" (a successful exec closes it: the read sees end of file).
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::errorf(Status::Code::kIo, "pipe: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(pipefd[0]), ::close(pipefd[1]);
    return Status::errorf(Status::Code::kIo, "cannot start {}: {}", argv[0], std::strerror(e));
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    int e = 0;
    if ((out_fd >= 0 && ::dup2(out_fd, 1) < 0) || (err_fd >= 0 && ::dup2(err_fd, 2) < 0)) e = errno;
    if (!e) ::execvp(args[0], args.data()), e = errno;
    (void)!::write(pipefd[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(pipefd[1]);
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(pipefd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Status::errorf(Status::Code::kIo, "waitpid for {}: {}", argv[0], std::strerror(errno));
  if (n == sizeof exec_errno)
    return Status::errorf(exec_errno == ENOENT ? Status::Code::kNotFound : Status::Code::kIo, "cannot run {}: {}",
                          argv[0], std::strerror(exec_errno));
  return status;
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with {}", WEXITSTATUS(status));
}

Result<std::string> capture(const std::vector<std::string>& argv) {
  char path[] = "/tmp/gamma-capture-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return Status::errorf(Status::Code::kIo, "cannot create a temporary file: {}", std::strerror(errno));
  ::unlink(path);  // the descriptor keeps it until closed
  auto status = spawn(argv, fd, fd);
  std::string out;
  if (status.is_ok()) {
    ::lseek(fd, 0, SEEK_SET);
    char buf[65536];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  }
  ::close(fd);
  if (!status.is_ok()) return status.status();
  if (!exited_ok(*status)) return Status::errorf("{} {}", argv[0], describe_exit(*status));
  return out;
}

CpuTimes cpu_times() {
  CpuTimes t;
  auto secs = [](const timeval& v) { return double(v.tv_sec) + 1e-6 * double(v.tv_usec); };
  rusage self{}, kids{};
  if (::getrusage(RUSAGE_SELF, &self) == 0 && ::getrusage(RUSAGE_CHILDREN, &kids) == 0)
    t.own = secs(self.ru_utime) + secs(self.ru_stime) + secs(kids.ru_utime) + secs(kids.ru_stime);
  std::ifstream f("/proc/stat");
  std::string line, cpu;
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (!std::getline(f, line) || hz <= 0) return t;
  std::istringstream in(line);
  // cpu  user nice system idle iowait irq softirq steal (guest time is inside user already)
  unsigned long long v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return t;
  for (auto& x : v)
    if (!(in >> x)) return t;
  const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  t.machine_busy = double(busy) / double(hz);
  return t;
}

double other_cores(const CpuTimes& from, const CpuTimes& to, double seconds) {
  if (from.machine_busy < 0 || to.machine_busy < 0 || seconds <= 0) return -1;
  return std::max(0.0, (to.machine_busy - from.machine_busy) - (to.own - from.own)) / seconds;
}

}  // namespace gm
