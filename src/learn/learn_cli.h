// The `learn` command line, shared by `gamma learn` and the gamma-learn executable it runs.
// Stage I lives in its own executable so that only it loads LibTorch: linking LibTorch into
// `gamma` cost every invocation ~0.7 s of library start-up (measured), on every subcommand.
#pragma once
#include <CLI/CLI.hpp>

#include "learn/learn.h"

namespace gm {

// Adds the learn options (and the pool positional) to `c`, writing into `o`.
void add_learn_options(CLI::App* c, LearnOptions* o);
// Parses argv as `gamma learn ARGS...`, runs Stage I, prints the summary line; errors are one
// line "gamma: error: ..." with exit code 1.
int learn_main(int argc, char** argv);

}  // namespace gm
