// gamma learn: Stage I (src/learn). The work runs in gamma-learn, next to this executable,
// the only program that loads LibTorch (learn_cli.h says why); this command hands it the
// arguments unparsed (help included) by exec, so exit codes and signals are gamma-learn's.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command.h"

namespace gm::cli {
namespace {

void add_learn(CLI::App& app) {
  auto* c = app.add_subcommand("learn", "Stage I: learn per-module candidate scores (GAMMA; resumable)");
  c->prefix_command();  // everything after `learn` goes to gamma-learn untouched
  c->set_help_flag();
  c->callback([c] {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string exe = (self.parent_path() / "gamma-learn").string();
    if (ec || ::access(exe.c_str(), X_OK) != 0)
      throw Failure("gamma-learn not found next to gamma (" + exe + "); build the gamma-learn target");
    std::vector<std::string> args = {"gamma learn"};
    for (const auto& a : c->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    ::execv(exe.c_str(), argv.data());
    throw Failure("cannot run " + exe + ": " + std::strerror(errno));
  });
}

}  // namespace
GAMMA_COMMAND(60, add_learn);
}  // namespace gm::cli
