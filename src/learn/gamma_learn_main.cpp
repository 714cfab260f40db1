// gamma-learn: the LibTorch programs behind `gamma learn` and `gamma hawq` (cli/cmd_learn.cpp
// execs it; argv[1] == "hawq" selects the HAWQ-V2 scorer).
#include <cstring>

#include "learn/hawq.h"
#include "learn/learn_cli.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "hawq") == 0) return gm::hawq_main(argc - 1, argv + 1);
  return gm::learn_main(argc, argv);
}
