// Child processes by fork/exec with an argument vector: no shell, so no quoting of paths.
// `gamma run` runs its steps and llama.cpp's tools this way (run/proc.h), `gamma fetch` pip
// and unzip.
#pragma once
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

// Runs argv (argv[0] a path, or a name looked up in PATH) and waits for it. `out_fd` and
// `err_fd`, when >= 0, become its stdout and stderr (else inherited). Returns the wait status;
// an error only when it could not be started or waited for.
Result<int> spawn(const std::vector<std::string>& argv, int out_fd = -1, int err_fd = -1);
bool exited_ok(int wait_status);
std::string describe_exit(int wait_status);  // "exited with 2", "killed by signal 9"
// argv's stdout and stderr together, for tools whose answer is printed.
Result<std::string> capture(const std::vector<std::string>& argv);

// CPU seconds so far: the whole machine's busy time over every core (/proc/stat; steal counted,
// since a hypervisor's use slows us as another job's does), and this process's own with its
// waited-for children (getrusage). Over an interval, busy - own is what other jobs took: a
// timing made beside them says little about this machine. machine_busy < 0 where unknown.
struct CpuTimes {
  double machine_busy = -1;
  double own = 0;
};
CpuTimes cpu_times();
// Cores' worth of CPU that other jobs took between `from` and `to`, `seconds` apart, on average
// (-1: unknown).
double other_cores(const CpuTimes& from, const CpuTimes& to, double seconds);

}  // namespace gm
