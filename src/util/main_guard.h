// The one error contract of gamma's executables (gamma, gamma-learn): whatever escapes a
// command, a Status turned into an exception, a std::exception, or LibTorch's c10::Error with
// its multi-line backtrace, ends as one line "gamma: error: ..." on stderr and exit code 1.
#pragma once
#include <functional>

namespace gm {

int guarded_main(const std::function<int()>& body);

// The first line of an exception's text (c10::Error appends a backtrace after it).
const char* first_line(const char* what, char* buf, unsigned size);

}  // namespace gm
