// gamma: mixed-precision GGUF quantization (GAMMA). The CLI only parses flags and calls one
// stage; every subcommand lives in its own cmd_*.cpp.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <vector>

#include "cli/command.h"
#include "llama/log.h"
#include "util/main_guard.h"

namespace gm::cli {
namespace {
std::vector<std::pair<int, AddCommand>>& registry() {
  static std::vector<std::pair<int, AddCommand>> r;
  return r;
}
}  // namespace
bool register_command(int order, AddCommand add) {
  registry().emplace_back(order, std::move(add));
  return true;
}
}  // namespace gm::cli

int main(int argc, char** argv) {
  using namespace gm::cli;
  gm::llama::capture_logs();
  // A file-size limit (ulimit -f) then fails a write with EFBIG, reported like a full disk,
  // instead of killing the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"gamma: learned mixed-precision GGUF quantization (GAMMA) for llama.cpp"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gamma 0.1.0");
  auto& reg = registry();
  std::stable_sort(reg.begin(), reg.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, add] : reg) add(app);
  return gm::guarded_main([&] {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      // --help and --version print and exit 0; a usage error is one line, like every other error.
      if (e.get_exit_code() == 0) return app.exit(e);
      std::fprintf(stderr, "gamma: error: %s\n", e.what());
      return e.get_exit_code();
    }
    return 0;
  });
}
