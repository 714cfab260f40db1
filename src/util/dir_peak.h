// DirPeak: the most bytes some directories held together over a span of time, sampled on a
// thread of its own. A stage's end alone misses what the stage makes and removes before it
// ends: gamma layers' per-layer files on top of Stage I's window were 1.4 GB that the default
// Qwen job's stage-end figure did not see.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gm {

class DirPeak {
 public:
  // Samples dir_bytes of every dir (summed) now, then every `period` until destroyed.
  DirPeak(std::vector<std::string> dirs, std::chrono::milliseconds period);
  ~DirPeak();
  DirPeak(const DirPeak&) = delete;
  DirPeak& operator=(const DirPeak&) = delete;
  uint64_t peak() const { return peak_.load(); }

 private:
  void sample();
  std::vector<std::string> dirs_;
  std::atomic<uint64_t> peak_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gm
