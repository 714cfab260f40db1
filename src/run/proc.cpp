#include "run/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/proc.h"

namespace gm::run {

Status run_step(const std::string& step, const std::vector<std::string>& argv) {
  auto status = spawn(argv);
  if (!status.is_ok()) return status.status().with_context(step);
  if (exited_ok(*status)) return Status::ok();
  return Status::errorf("{} failed ({} {})", step, argv[0], describe_exit(*status));
}

Status run_tool(const std::string& step, const std::vector<std::string>& argv, const std::string& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::errorf("{}: cannot write {}: {}", step, log, std::strerror(errno));
  auto status = spawn(argv, fd, fd);
  ::close(fd);
  if (!status.is_ok()) return status.status().with_context(step);
  if (exited_ok(*status)) return Status::ok();
  return Status::errorf("{} failed ({} {}; its log: {})", step, argv[0], describe_exit(*status), log);
}

}  // namespace gm::run
