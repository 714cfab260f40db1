// Stage I across processes: a Gloo process group from LibTorch's c10d (the engine multi-node
// PyTorch jobs use), met through a TCPStore (tcp://HOST:PORT, rank 0 serves it) or a
// FileStore (file://PATH, a path every rank sees). Stage I's state is small and replicated:
// each rank runs the layers it owns, one all-reduce per step sums the per-module gradients
// and per-layer MSEs, and every rank then takes the same update. A rank that dies or never
// connects ends the others' collective with an error within the timeout, never a hang.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "decoder/activations.h"
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

  // Work whose length differs by rank (each builds its part of the activation cache) ends in
  // a meeting that no collective timeout can bound: a rank calls beat() as it makes progress
  // and arrive() when done; arrive() returns when every rank has arrived, or fails when a
  // rank that has not shows no beat for the timeout (it died or hangs).
  void beat(const std::string& tag);
  Status arrive(const std::string& tag);

  // The union of [lo, hi] over the ranks that see the same directory `dir` as rank 0 (a
  // shared disk: one of them builds what they all need); other ranks get their own [lo, hi].
  Result<std::pair<int, int>> union_over_shared_dir(const std::string& dir, int lo, int hi);

 private:
  struct Impl;
  Comm(int rank, int world, std::unique_ptr<Impl> impl);
  int rank_ = 0, world_ = 1;
  double timeout_s_ = 0;
  std::unique_ptr<Impl> impl_;
};

// A rank's part of the activation cache: boundaries lo..hi (its layers lo..hi-1), built where
// missing. Ranks that share rank 0's cache directory build the union of their parts once
// (a file lock picks the builder); ranks on other disks build their own part at the same time.
// Returns when every rank has its part.
Result<std::unique_ptr<ActivationCache>> open_cache_part(Comm& comm, const std::string& teacher_path, CalibOptions calib,
                                                          int lo, int hi);

}  // namespace gm
