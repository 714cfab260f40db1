// gamma-learn: the LibTorch programs behind `gamma learn` and `gamma hawq` (cli/cmd_learn.cpp
// execs it; argv[1] == "hawq" selects the HAWQ-V2 scorer). Every error ends as one line
// (util/main_guard.h), LibTorch's included.
#include <cstdlib>
#include <cstring>

#include <ATen/ATen.h>

#include "learn/hawq.h"
#include "learn/learn_cli.h"
#include "util/main_guard.h"

int main(int argc, char** argv) {
  return gm::guarded_main([&] {
    // Fault injection for the error-contract test: a LibTorch exception nobody catches.
    if (const char* f = std::getenv("GAMMA_FAULT"); f && std::strcmp(f, "torch") == 0) at::zeros({2}).view({3});
    if (argc > 1 && std::strcmp(argv[1], "hawq") == 0) return gm::hawq_main(argc - 1, argv + 1);
    return gm::learn_main(argc, argv);
  });
}
