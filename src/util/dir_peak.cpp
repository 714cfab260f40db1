#include "util/dir_peak.h"

#include "util/files.h"

namespace gm {

DirPeak::DirPeak(std::vector<std::string> dirs, std::chrono::milliseconds period) : dirs_(std::move(dirs)) {
  sample();
  thread_ = std::thread([this, period] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
      lock.unlock();  // a sample of a large tree takes a while: the destructor must not wait on it for the lock
      sample();
      lock.lock();
    }
  });
}

DirPeak::~DirPeak() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void DirPeak::sample() {
  uint64_t bytes = 0;
  for (const auto& d : dirs_) bytes += dir_bytes(d);  // error_code throughout: files removed meanwhile count nothing
  uint64_t seen = peak_.load();
  while (bytes > seen && !peak_.compare_exchange_weak(seen, bytes)) {
  }
}

}  // namespace gm
