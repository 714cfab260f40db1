// Shared helpers for gamma's tests: data paths, a scratch directory, and running the CLI or
// a llama.cpp tool as a subprocess (the way a user would) with its output captured.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/json.h"

namespace gm::testing {

inline std::string shared_data(const std::string& rel) { return std::string(GAMMA_SHARED_DATA) + "/" + rel; }
inline std::string stories260k() { return shared_data("models/stories260K.gguf"); }
inline std::string llama_tool(const std::string& name) { return std::string(GAMMA_LLAMA_BIN) + "/" + name; }
inline std::string gamma_cli() { return GAMMA_CLI; }

// The cached SmolLM2-135M (`gamma fetch smollm2-135m`), or "" when not fetched. CI fetches
// it before the tests; locally the SmolLM2 tests skip without it.
inline std::string smollm2() {
  const char* env = std::getenv("GAMMA_SMOLLM2");
  if (env && std::filesystem::exists(env)) return env;
  const char* c = std::getenv("GAMMA_CACHE");
  const char* x = std::getenv("XDG_CACHE_HOME");
  const char* h = std::getenv("HOME");
  std::string base = c ? c : (x ? std::string(x) + "/gamma" : std::string(h ? h : "/root") + "/.cache/gamma");
  std::string p = base + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(p) ? p : "";
}

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "gamma";
    path_ = std::filesystem::temp_directory_path() / ("gamma-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, capturing its combined output.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}
inline RunResult gamma(const std::string& args) { return run(gamma_cli() + " " + args); }

// The number a regex's first group captures in `text` (a figure a command printed); -1 if none.
inline double number_after(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return -1;
  return std::stod(m[1]);
}

// gamma eval's KLD against stories260K of the file `plan` (a plan JSON) makes from `pool`, on the
// first `chunks` chunks of `ctx` tokens of `text`; the GGUF and the result lie beside the plan.
inline double stories_plan_kld(const std::string& pool, const std::string& plan, const std::string& text, int ctx,
                               int chunks, const std::string& extra = "") {
  const std::string gguf = plan + ".gguf", ev = plan + ".eval.json";
  auto r = gamma("emit " + pool + " " + plan + " -o " + gguf);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = gamma("eval " + gguf + " --teacher " + stories260k() + " --text " + text + " -c " + std::to_string(ctx) +
            " --chunks " + std::to_string(chunks) + " -t 2 -q " + extra + " -o " + ev);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto j = gm::read_json(ev, "gamma.eval", 1);
  return j.is_ok() ? (*j)["kld"]["mean"].get<double>() : -1;
}

// Runs a llama.cpp tool whose result we read from its log. The vendored llama.cpp leaks its
// asynchronous logger on purpose (common/log.cpp, llama.cpp issue 22142), so on a loaded
// machine a tool can exit 0 before its last lines (e.g. "Final estimate") are written. Such
// a run is repeated, up to `tries` times; any other failure is returned at once.
inline RunResult run_llama_tool(const std::string& cmd, const std::string& needle, int tries = 3) {
  RunResult r;
  for (int i = 0; i < tries; ++i) {
    r = run(cmd);
    if (r.exit_code != 0 || r.output.find(needle) != std::string::npos) break;
  }
  return r;
}

}  // namespace gm::testing
