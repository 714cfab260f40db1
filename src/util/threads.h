// How many threads a stage uses when the user gave none: $GAMMA_THREADS if set, else every
// core. One rule for every stage (pool, learn, hawq, eval, emit, run).
#pragma once

namespace gm {

// n_threads > 0 is taken as given; otherwise $GAMMA_THREADS (> 0), else the cores (>= 1).
int resolve_threads(int n_threads = 0);

}  // namespace gm
