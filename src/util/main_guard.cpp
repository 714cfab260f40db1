#include "util/main_guard.h"

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
