// Linked into the llama.cpp tools gamma builds. common/log.cpp leaks its asynchronous logger
// on purpose (llama.cpp issue 22142), so a tool returning from main can lose the last lines
// still queued (e.g. llama-perplexity's "Final estimate" and KLD statistics) on a loaded
// machine. Pausing the logger at exit makes its worker write the queue out and stop first.
#include <cstdlib>

#include "log.h"

namespace {
const int registered = std::atexit([] { common_log_pause(common_log_main()); });
}  // namespace
