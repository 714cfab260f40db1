// How a subcommand plugs into the thin CLI: each cli/cmd_*.cpp defines a function that adds
// its CLI11 subcommand and registers it with GAMMA_COMMAND(order, fn). A command's callback
// reports failure by calling fail_if(status), which main turns into one stderr line
// "gamma: error: <message>" and exit code 1.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "util/status.h"

namespace gm::cli {

struct Failure : std::runtime_error {
  explicit Failure(const std::string& m) : std::runtime_error(m) {}
};
inline void fail_if(const Status& st) {
  if (!st.is_ok()) throw Failure(st.message());
}
template <typename T>
T value_or_fail(Result<T> r) {
  if (!r.is_ok()) throw Failure(r.status().message());
  return std::move(r).value();
}

using AddCommand = std::function<void(CLI::App&)>;
bool register_command(int order, AddCommand add);

// `gamma learn` and `gamma hawq` run in gamma-learn, the one LibTorch program: a subcommand
// NAME whose arguments go to it unparsed (after `lead`), by exec (cmd_learn.cpp).
void add_gamma_learn_passthrough(CLI::App& app, const char* name, const char* help, std::vector<std::string> lead);

}  // namespace gm::cli

#define GAMMA_COMMAND(order, fn) \
  static const bool GAMMA_CONCAT(_gamma_cmd_, __LINE__) = ::gm::cli::register_command(order, fn)
