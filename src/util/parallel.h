// The one thread loop: parallel_chunks / parallel_for over [0, n) with dynamic scheduling.
// Chunk k is always [k*grain, min(n, (k+1)*grain)), whichever thread runs it, so a caller
// that keeps one partial result per chunk (and merges them in chunk order) gets the same
// numbers for any number of threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "util/threads.h"

namespace gm {

// Runs fn(first, last, thread) for each chunk [first, last) of `grain` indices on `threads`
// threads (<= 0: resolve_threads); fn must only write per-chunk or per-thread state.
template <typename Fn>
void parallel_chunks(int64_t n, int threads, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n_chunks = (n + grain - 1) / grain;
  threads = int(std::max<int64_t>(1, std::min<int64_t>(resolve_threads(threads), n_chunks)));
  std::atomic<int64_t> next{0};
  auto work = [&](int t) {
    for (;;) {
      const int64_t first = next.fetch_add(grain, std::memory_order_relaxed);
      if (first >= n) break;
      fn(first, std::min(n, first + grain), t);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

// Runs fn(i, thread) for i in [0, n), in chunks of `grain`; fn must only write per-i or
// per-thread state.
template <typename Fn>
void parallel_for(int64_t n, int threads, int64_t grain, Fn&& fn) {
  parallel_chunks(n, threads, grain, [&](int64_t first, int64_t last, int t) {
    for (int64_t i = first; i < last; ++i) fn(i, t);
  });
}

}  // namespace gm
