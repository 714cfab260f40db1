#include "learn/dist.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <exception>

namespace gm {

struct Comm::Impl {
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
  } catch (const std::exception& e) {
    std::string m = e.what();  // c10::Error appends a backtrace: its first line says what
    return Status::errorf("rank {} of {}: rendezvous {} failed within {} s: {}", rank, world_size, rendezvous, timeout_s,
                          m.substr(0, m.find('\n')));
  }
  return std::unique_ptr<Comm>(new Comm(rank, world_size, std::move(impl)));
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

}  // namespace gm
