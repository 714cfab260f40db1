// gamma learn: Stage I (src/learn). The work runs in gamma-learn, next to this executable,
// the only program that loads LibTorch (gamma_learn.cpp says why); this command hands it the
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

// Replaces this process by gamma-learn with `args` (argv[0] first).
[[noreturn]] void exec_gamma_learn(std::vector<std::string> args) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string exe = (self.parent_path() / "gamma-learn").string();
  if (ec || ::access(exe.c_str(), X_OK) != 0)
    throw Failure("gamma-learn not found next to gamma (" + exe + "); build the gamma-learn target");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(exe.c_str(), argv.data());
  throw Failure("cannot run " + exe + ": " + std::strerror(errno));
}

}  // namespace

void add_gamma_learn_passthrough(CLI::App& app, const char* name, const char* help, std::vector<std::string> lead) {
  auto* c = app.add_subcommand(name, help);
  c->prefix_command();  // everything after the name goes to gamma-learn untouched
  c->set_help_flag();
  c->callback([c, lead] {
    std::vector<std::string> args = lead;
    for (const auto& a : c->remaining()) args.push_back(a);
    exec_gamma_learn(args);
  });
}


namespace {

void add_learn(CLI::App& app) {
  add_gamma_learn_passthrough(app, "learn", "Stage I: learn per-module candidate scores (GAMMA; resumable)", {"gamma learn"});
}

}  // namespace
GAMMA_COMMAND(60, add_learn);
}  // namespace gm::cli
