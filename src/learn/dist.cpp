#include "learn/dist.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <exception>
#include <filesystem>
#include <random>
#include <thread>

#include <unistd.h>

#include "decoder/activations.h"
#include "util/files.h"

namespace gm {

struct Comm::Impl {
  c10::intrusive_ptr<::c10d::Store> store;
  c10::intrusive_ptr<::c10d::ProcessGroupGloo> pg;
};

Comm::Comm(int rank, int world, std::unique_ptr<Impl> impl) : rank_(rank), world_(world), impl_(std::move(impl)) {}
Comm::~Comm() = default;

Result<std::unique_ptr<Comm>> Comm::connect(const std::string& rendezvous, int rank, int world_size, double timeout_s) {
  if (world_size < 1) return Status::errorf("--world-size must be at least 1 (got {})", world_size);
  if (rank < 0 || rank >= world_size) return Status::errorf("--rank must be in 0..{} (got {})", world_size - 1, rank);
  if (world_size == 1) return std::unique_ptr<Comm>(new Comm(0, 1, nullptr));
  if (!(timeout_s > 0)) return Status::errorf("the rendezvous timeout must be positive (got {})", timeout_s);
  const auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  auto impl = std::make_unique<Impl>();
  try {
    c10::intrusive_ptr<::c10d::Store> store;
    std::string host = "127.0.0.1";
    if (rendezvous.rfind("file://", 0) == 0 && rendezvous.size() > 7) {
      store = c10::make_intrusive<::c10d::FileStore>(rendezvous.substr(7), world_size);
    } else if (rendezvous.rfind("tcp://", 0) == 0) {
      const std::string hp = rendezvous.substr(6);
      const size_t colon = hp.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size())
        return Status::errorf("--rendezvous {} must be tcp://HOST:PORT", rendezvous);
      host = hp.substr(0, colon);
      const int port = std::atoi(hp.c_str() + colon + 1);
      if (port <= 0 || port > 65535) return Status::errorf("--rendezvous {}: bad port", rendezvous);
      ::c10d::TCPStoreOptions o;
      o.port = uint16_t(port);
      o.isServer = rank == 0;
      o.numWorkers = world_size;
      o.waitWorkers = true;
      o.timeout = timeout;
      store = c10::make_intrusive<::c10d::TCPStore>(host, o);
    } else {
      return Status::errorf("--rendezvous must be tcp://HOST:PORT or file://PATH (got '{}')", rendezvous);
    }
    store->setTimeout(timeout);
    auto opts = ::c10d::ProcessGroupGloo::Options::create(timeout);
    // Local jobs talk over the loopback; others over the address this host's name resolves to.
    const bool local = rendezvous.rfind("file://", 0) == 0 || host == "127.0.0.1" || host == "localhost";
    opts->devices.push_back(local ? ::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : ::c10d::ProcessGroupGloo::createDefaultDevice());
    impl->pg = c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, world_size, opts);
    impl->store = store;
  } catch (const std::exception& e) {
    std::string m = e.what();  // c10::Error appends a backtrace: its first line says what
    return Status::errorf("rank {} of {}: rendezvous {} failed within {} s: {}", rank, world_size, rendezvous, timeout_s,
                          m.substr(0, m.find('\n')));
  }
  std::unique_ptr<Comm> c(new Comm(rank, world_size, std::move(impl)));
  c->timeout_s_ = timeout_s;
  return c;
}

namespace {
// c10d reports a dead peer or a timeout by exception; the message's first line says which.
Status collective_error(const char* what, int rank, const std::exception& e) {
  std::string m = e.what();
  m = m.substr(0, m.find('\n'));
  return Status::errorf("rank {}: {} failed (another rank died or timed out?): {}", rank, what, m);
}
}  // namespace

Status Comm::all_reduce_sum(std::vector<double>& v) {
  if (world_ == 1 || v.empty()) return Status::ok();
  try {
    std::vector<at::Tensor> t{at::from_blob(v.data(), {int64_t(v.size())}, at::TensorOptions().dtype(at::kDouble))};
    impl_->pg->allreduce(t)->wait();
  } catch (const std::exception& e) {
    return collective_error("all-reduce", rank_, e);
  }
  return Status::ok();
}

Status Comm::broadcast(std::string& s, int root) {
  if (world_ == 1) return Status::ok();
  ::c10d::BroadcastOptions bo;
  bo.rootRank = root;
  try {
    int64_t n = int64_t(s.size());
    std::vector<at::Tensor> len{at::from_blob(&n, {1}, at::TensorOptions().dtype(at::kLong))};
    impl_->pg->broadcast(len, bo)->wait();
    s.resize(size_t(n));
    if (n == 0) return Status::ok();
    std::vector<at::Tensor> data{at::from_blob(s.data(), {n}, at::TensorOptions().dtype(at::kByte))};
    impl_->pg->broadcast(data, bo)->wait();
  } catch (const std::exception& e) {
    return collective_error("broadcast", rank_, e);
  }
  return Status::ok();
}

void Comm::beat(const std::string& tag) {
  if (world_ == 1) return;
  try {
    impl_->store->add(tag + "/beat/" + std::to_string(rank_), 1);
  } catch (const std::exception&) {
    // A store that cannot be reached ends the job at the next arrive() or collective.
  }
}

Status Comm::arrive(const std::string& tag) {
  if (world_ == 1) return Status::ok();
  using clock = std::chrono::steady_clock;
  try {
    impl_->store->add(tag + "/arrived/" + std::to_string(rank_), 1);
    // Progress is any beat or arrival: a rank waiting for a file lock that another builds
    // under does not beat itself, so the wait fails only when the whole job has been silent
    // for the timeout, and names the ranks that never arrived.
    std::vector<int64_t> seen(size_t(2 * world_), -1);
    auto last = clock::now();
    for (;;) {
      std::vector<int> absent;
      bool moved = false;
      for (int r = 0; r < world_; ++r) {
        const int64_t a = impl_->store->add(tag + "/arrived/" + std::to_string(r), 0);
        const int64_t b = impl_->store->add(tag + "/beat/" + std::to_string(r), 0);
        moved = moved || a != seen[size_t(2 * r)] || b != seen[size_t(2 * r + 1)];
        seen[size_t(2 * r)] = a, seen[size_t(2 * r + 1)] = b;
        if (a == 0) absent.push_back(r);
      }
      if (absent.empty()) break;
      if (moved) last = clock::now();
      const double silent = std::chrono::duration<double>(clock::now() - last).count();
      if (silent > timeout_s_)
        return Status::errorf("rank {}: no progress from rank {} in {:.0f} s while waiting for its {} (died or hung?)",
                              rank_, absent[0], silent, tag);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } catch (const std::exception& e) {
    return collective_error(tag.c_str(), rank_, e);
  }
  return Status::ok();
}

Result<std::pair<int, int>> Comm::union_over_shared_dir(const std::string& dir, int lo, int hi) {
  if (world_ == 1) return std::make_pair(lo, hi);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", dir, ec.message());
  // Rank 0 leaves a random token in dir; a rank that reads it there shares rank 0's disk.
  std::string token;
  if (rank_ == 0) {
    std::random_device rd;
    token = std::to_string(rd()) + std::to_string(rd()) + "-" + std::to_string(::getpid());
  }
  GAMMA_RETURN_IF_ERROR(broadcast(token));
  const std::string mark = dir + "/.rank0-" + token;
  if (rank_ == 0) GAMMA_RETURN_IF_ERROR(write_file_atomic_nosync(mark, token));
  GAMMA_RETURN_IF_ERROR(broadcast(token));  // rank 0's mark is on disk from here
  auto seen = read_file(mark);
  const bool shared = seen.is_ok() && *seen == token;
  std::vector<double> v(size_t(3 * world_), 0.0);
  v[size_t(3 * rank_)] = shared ? 1 : 0;
  v[size_t(3 * rank_ + 1)] = lo;
  v[size_t(3 * rank_ + 2)] = hi;
  Status st = all_reduce_sum(v);
  if (rank_ == 0) fs::remove(mark, ec);
  GAMMA_RETURN_IF_ERROR(st);
  if (!shared) return std::make_pair(lo, hi);
  int a = lo, b = hi;
  for (int r = 0; r < world_; ++r)
    if (v[size_t(3 * r)] > 0.5) a = std::min(a, int(v[size_t(3 * r + 1)])), b = std::max(b, int(v[size_t(3 * r + 2)]));
  return std::make_pair(a, b);
}

Result<std::unique_ptr<ActivationCache>> open_cache_part(Comm& comm, const std::string& teacher_path, CalibOptions calib,
                                                          int lo, int hi) {
  GAMMA_ASSIGN_OR_RETURN(auto range, comm.union_over_shared_dir(activation_cache_root(calib), lo, hi));
  calib.first_boundary = range.first;
  calib.last_boundary = range.second;
  const std::string tag = "activation cache";
  calib.on_sequence = [&comm, &tag, then = calib.on_sequence](int done) {
    comm.beat(tag);
    if (then) then(done);
  };
  GAMMA_ASSIGN_OR_RETURN(auto cache, ActivationCache::open_or_build(teacher_path, calib));
  GAMMA_RETURN_IF_ERROR(comm.arrive(tag));
  return cache;
}

}  // namespace gm
