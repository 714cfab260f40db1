#include "util/threads.h"

#include <cstdlib>
#include <thread>

namespace gm {

int resolve_threads(int n_threads) {
  if (n_threads > 0) return n_threads;
  if (const char* t = std::getenv("GAMMA_THREADS"); t && std::atoi(t) > 0) return std::atoi(t);
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? int(hc) : 1;
}

}  // namespace gm
