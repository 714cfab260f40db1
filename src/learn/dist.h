// Stage I across processes: a Gloo process group from LibTorch's c10d (the engine multi-node
// PyTorch jobs use), met through a TCPStore (tcp://HOST:PORT, rank 0 serves it) or a
// FileStore (file://PATH, a path every rank sees). Stage I's state is small and replicated:
// each rank runs the layers it owns, one all-reduce per step sums the per-module gradients
// and per-layer MSEs, and every rank then takes the same update. A rank that dies or never
// connects ends the others' collective with an error within the timeout, never a hang.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

class Comm {
 public:
  // world_size 1 needs no rendezvous and makes no group: every call is then a no-op.
  static Result<std::unique_ptr<Comm>> connect(const std::string& rendezvous, int rank, int world_size,
                                               double timeout_s);
  ~Comm();
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // Element-wise sum over the ranks, in place (every rank passes the same length).
  Status all_reduce_sum(std::vector<double>& v);
  // Rank root's string, on every rank.
  Status broadcast(std::string& s, int root = 0);

 private:
  struct Impl;
  Comm(int rank, int world, std::unique_ptr<Impl> impl);
  int rank_ = 0, world_ = 1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gm
