// gamma-learn: the Stage I executable behind `gamma learn` (see learn_cli.h for why apart).
#include "learn/learn_cli.h"

int main(int argc, char** argv) { return gm::learn_main(argc, argv); }
