// The one sink for libllama's and ggml's log (llama_log_set also routes ggml's): nothing is
// printed, ERROR lines are kept, so a failing call becomes one Status line with its cause.
#pragma once
#include <string>

namespace gm::llama {

// Installs the sink (once; init() does this too). Call early to quiet a process from the
// start, e.g. before gguf.h reads a header.
void capture_logs();
// Forgets the kept errors: call before the call whose failure last_error() should explain.
void clear_errors();
// The ERROR lines since clear_errors(), one line: the first (usually the cause, e.g.
// "invalid magic") and the last (the failing call); "" when there were none.
std::string last_error();

}  // namespace gm::llama
