// Child processes of `gamma run`: gamma's own commands (their output is the run's output) and
// llama.cpp's tools (their chatter goes to a log, shown only by name on failure). Both by
// fork/exec with an argument vector: no shell, so no quoting of user paths.
#pragma once
#include <string>
#include <vector>

#include "util/status.h"

namespace gm::run {

// argv[0] with inherited stdout/stderr; a non-zero exit fails with the step's name (the
// child has already printed its own one-line error).
Status run_step(const std::string& step, const std::vector<std::string>& argv);
// argv[0] with stdout and stderr appended to `log`.
Status run_tool(const std::string& step, const std::vector<std::string>& argv, const std::string& log);
// argv[0]'s stdout and stderr together, for tools whose answer is printed (llama-quantize --dry-run).
Result<std::string> capture(const std::vector<std::string>& argv);

}  // namespace gm::run
