#include "util/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace gm {

Progress::Progress(std::string label, int64_t total, bool quiet)
    : label_(std::move(label)), total_(total), tty_(!quiet && ::isatty(2)),
      forced_(!quiet && std::getenv("GAMMA_PROGRESS") && std::string(std::getenv("GAMMA_PROGRESS")) == "1"),
      start_(std::chrono::steady_clock::now()), last_(start_ - std::chrono::hours(1)) {}

Progress::~Progress() {
  // Abandoned (an error on the way): end the bar's line without claiming it finished.
  if (!finished_ && done_ > 0 && tty_) std::fputs("\n", stderr);
}

void Progress::update(int64_t done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  auto now = std::chrono::steady_clock::now();
  auto min_gap = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000);
  // The last step is drawn by finish(): drawn here too, a log would show the full bar twice
  // whenever the final update fell after the gap (a slow machine).
  if (now - last_ < min_gap || (total_ > 0 && done >= total_)) return;
  last_ = now;
  draw(false);
}

void Progress::finish(const std::string& extra) {
  if (!extra.empty()) extra_ = extra;
  done_ = total_;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final) {
  if (!tty_ && !forced_) return;
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double frac = total_ > 0 ? double(done_) / double(total_) : 0;
  double eta = frac > 0 ? el * (1 - frac) / frac : 0;
  const int w = 24;
  int fill = int(frac * w + 0.5);
  std::string bar(fill, '#');
  bar.resize(w, ' ');
  std::fprintf(stderr, "%s%s [%s] %lld/%lld %.1fs ETA %.0fs%s%s%s", tty_ ? "\r\033[K" : "", label_.c_str(),
               bar.c_str(), (long long)done_, (long long)total_, el, final ? 0.0 : eta,
               extra_.empty() ? "" : " | ", extra_.c_str(), (final || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace gm
