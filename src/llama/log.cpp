#include "llama/log.h"

#include <mutex>
#include <vector>

#include "llama.h"

namespace gm::llama {
namespace {

std::mutex g_mutex;
std::vector<std::string> g_errors;  // ERROR messages since the last clear_errors()
bool g_in_error = false;

// Keeps ERROR messages (which may arrive in CONT pieces); drops everything else.
void sink(ggml_log_level level, const char* text, void*) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (level == GGML_LOG_LEVEL_ERROR) {
    if (g_errors.size() >= 16) g_errors.erase(g_errors.begin());
    g_errors.emplace_back(text ? text : "");
    g_in_error = true;
  } else if (level == GGML_LOG_LEVEL_CONT && g_in_error && !g_errors.empty()) {
    g_errors.back() += text ? text : "";
  } else {
    g_in_error = false;
  }
}

}  // namespace

void capture_logs() {
  static std::once_flag once;
  std::call_once(once, [] { llama_log_set(sink, nullptr); });
}

void clear_errors() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_errors.clear();
}

std::string last_error() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::string e;
  for (size_t i = 0; i < g_errors.size(); ++i) {
    if (g_errors.size() > 2 && i != 0 && i + 1 != g_errors.size()) continue;
    std::string m = g_errors[i];
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (m.empty()) continue;
    if (!e.empty()) e += "; ";
    e += m;
  }
  for (char& c : e)
    if (c == '\n') c = ' ';  // keep it one line
  return e;
}

}  // namespace gm::llama
