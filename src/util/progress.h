// A one-line progress bar on stderr ("label [#####     ] 42/100 12.3s ETA 17s | extra"),
// redrawn at most 10 times a second, silent when stderr is not a terminal unless forced
// with GAMMA_PROGRESS=1 (then it prints a line every few seconds instead).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace gm {

class Progress {
 public:
  // quiet: never draw (the command's -q), whatever the terminal or GAMMA_PROGRESS.
  Progress(std::string label, int64_t total, bool quiet = false);
  ~Progress();
  void update(int64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");

 private:
  void draw(bool final);
  std::string label_, extra_;
  int64_t total_, done_ = 0;
  bool tty_, forced_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace gm
