// The steps of `gamma run` (util/proc.h runs them): gamma's own commands, whose output is the
// run's output, and llama.cpp's tools, whose chatter goes to a log shown only by name on failure.
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

}  // namespace gm::run
