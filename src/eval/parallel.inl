// parallel_for (see llama_env.h).
#pragma once
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace gm::eval {

template <typename Fn>
void parallel_for(int64_t n, int threads, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n_tasks = (n + grain - 1) / grain;
  threads = int(std::max<int64_t>(1, std::min<int64_t>(threads, n_tasks)));
  std::atomic<int64_t> next{0};
  auto work = [&](int t) {
    for (;;) {
      const int64_t first = next.fetch_add(grain, std::memory_order_relaxed);
      if (first >= n) break;
      const int64_t last = std::min(n, first + grain);
      for (int64_t i = first; i < last; ++i) fn(i, t);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

}  // namespace gm::eval
