#include "util/main_guard.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

namespace gm {

const char* first_line(const char* what, char* buf, unsigned size) {
  if (!what || !*what) return "unknown error";
  while (*what == '\n' || *what == ' ') ++what;
  unsigned n = 0;
  while (what[n] && what[n] != '\n' && n + 1 < size) ++n;
  std::memcpy(buf, what, n);
  buf[n] = 0;
  return buf;
}

int guarded_main(const std::function<int()>& body) {
  char buf[1024];
  // Past a file-size limit (ulimit -f) a write fails with EFBIG and gamma says which file,
  // instead of the kernel killing it with SIGXFSZ mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gamma: error: %s\n", first_line(e.what(), buf, sizeof buf));
  } catch (...) {
    std::fprintf(stderr, "gamma: error: unknown exception\n");
  }
  return 1;
}

}  // namespace gm
