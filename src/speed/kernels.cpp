#include "speed/kernels.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <thread>
#include <tuple>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf_model/model.h"
#include "llama/backend.h"

namespace gm::speed {
namespace {

struct CtxFree {
  void operator()(ggml_context* c) const { ggml_free(c); }
};
struct BufFree {
  void operator()(ggml_backend_buffer* b) const { ggml_backend_buffer_free(b); }
};
struct BackendFree {
  void operator()(ggml_backend* b) const { ggml_backend_free(b); }
};
struct AllocrFree {
  void operator()(ggml_gallocr* a) const { ggml_gallocr_free(a); }
};
using CtxPtr = std::unique_ptr<ggml_context, CtxFree>;

// The buffer type llama.cpp's loader gives a weight of this type and shape on the CPU: the first
// extra buffer type (repack, ...) whose device supports ggml_mul_mat on it, else the plain CPU
// buffer (llama-model-loader.cpp, select_weight_buft).
ggml_backend_buffer_type_t weight_buft(ggml_tensor* w) {
  ggml_backend_buffer_type_t plain = ggml_backend_cpu_buffer_type();
  if (!gm::llama::model_params().use_extra_bufts) return plain;
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!dev) return plain;
  auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  if (!get) return plain;
  ggml_init_params p = {ggml_tensor_overhead() * 4, nullptr, true};
  CtxPtr ctx(ggml_init(p));
  ggml_tensor* b = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, w->ne[0], kPrefillBatch);
  ggml_tensor* op = ggml_mul_mat(ctx.get(), w, b);
  for (ggml_backend_buffer_type_t* e = get(dev); e && *e; ++e) {
    w->buffer = ggml_backend_buft_alloc_buffer(*e, 0);
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    ggml_backend_buffer_free(w->buffer);
    w->buffer = nullptr;
    if (ok) return *e;
  }
  return plain;
}


}  // namespace

std::vector<uint8_t> tiled_weight(ggml_type type, int64_t n_in, int64_t n_out) {
  const size_t row_bytes = ggml_row_size(type, n_in);
  const int64_t block_rows = std::min<int64_t>(n_out, 64);
  std::vector<float> src(static_cast<size_t>(n_in * block_rows));
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 0.02f);
  for (auto& v : src) v = nd(rng);
  std::vector<float> imatrix(static_cast<size_t>(n_in), 1.0f);
  std::vector<uint8_t> block(row_bytes * block_rows);
  ggml_quantize_chunk(type, src.data(), block.data(), 0, block_rows, n_in,
                      ggml_quantize_requires_imatrix(type) ? imatrix.data() : nullptr);
  // The rows after the first block_rows are their tile row with its units (quantization blocks,
  // or 32 elements of a float type) in a random order. Repeated data decodes faster than real
  // weights on a VM whose host merges identical pages: the same Q8_0 file with its data tiled ran
  // tg128 19 % faster than with its real data (results/speed_model, tile_check), and a probe or a
  // kernel chain must read as many distinct bytes as the real weight.
  const size_t unit = ggml_blck_size(type) > 1 || n_in % 32 != 0 ? ggml_type_size(type) : 32 * ggml_type_size(type);
  const size_t units = row_bytes / unit;
  std::vector<uint32_t> order(units);
  std::iota(order.begin(), order.end(), 0u);
  std::vector<uint8_t> data(row_bytes * n_out);
  std::copy(block.begin(), block.end(), data.begin());
  for (int64_t r = block_rows; r < n_out; ++r) {
    const uint8_t* from = block.data() + (r % block_rows) * row_bytes;
    uint8_t* to = data.data() + r * row_bytes;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t u = 0; u < units; ++u) std::memcpy(to + u * unit, from + order[u] * unit, unit);
  }
  return data;
}

bool repacked(const std::string& type_name, int64_t n_in, int64_t n_out) {
  auto type = parse_type(type_name);
  if (!type.is_ok() || n_in % ggml_blck_size(*type) != 0) return false;
  ggml_init_params p = {ggml_tensor_overhead() * 2, nullptr, true};
  CtxPtr ctx(ggml_init(p));
  ggml_tensor* w = ggml_new_tensor_2d(ctx.get(), *type, n_in, n_out);
  return weight_buft(w) != ggml_backend_cpu_buffer_type();
}

namespace {
// CPU time of all of this process's threads.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
}  // namespace

// Seconds per graph run of the products W_i x_i (x_i: n_in x batch, one per row width), the
// fastest of `reps` after one warm-up: on a shared machine the others' load only ever adds
// time, so the minimum is the kernels' own (llama-bench's side is read the same way, speed.cpp).
Result<double> time_chain(const std::vector<MatSpec>& chain, int64_t batch, int reps, int threads, bool* loaded) {
  if (chain.empty()) return Status::error("speed: nothing to time");
  std::vector<ggml_type> types;
  for (const auto& m : chain) {
    GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(m.type));
    if (m.n_in <= 0 || m.n_out <= 0 || m.n_in % ggml_blck_size(t) != 0)
      return Status::errorf("speed: {} cannot hold a {} x {} weight", m.type, m.n_in, m.n_out);
    types.push_back(t);
  }
  gm::llama::init();
  std::unique_ptr<ggml_backend, BackendFree> backend(ggml_backend_cpu_init());
  if (!backend) return Status::error("speed: cannot start ggml's CPU backend");
  ggml_backend_cpu_set_n_threads(backend.get(), threads);

  // Weights by buffer type (each as llama.cpp's loader would place it).
  ggml_init_params wp = {ggml_tensor_overhead() * (chain.size() + 1), nullptr, true};
  CtxPtr probe(ggml_init(wp));
  std::map<ggml_backend_buffer_type_t, std::vector<size_t>> by_buft;
  for (size_t i = 0; i < chain.size(); ++i) {
    ggml_tensor* t = ggml_new_tensor_2d(probe.get(), types[i], chain[i].n_in, chain[i].n_out);
    by_buft[weight_buft(t)].push_back(i);
  }
  std::vector<CtxPtr> wctx;
  std::vector<std::unique_ptr<ggml_backend_buffer, BufFree>> wbuf;
  std::vector<ggml_tensor*> w(chain.size());
  for (auto& [buft, idx] : by_buft) {
    ggml_init_params p = {ggml_tensor_overhead() * (idx.size() + 1), nullptr, true};
    wctx.emplace_back(ggml_init(p));
    for (size_t i : idx) w[i] = ggml_new_tensor_2d(wctx.back().get(), types[i], chain[i].n_in, chain[i].n_out);
    wbuf.emplace_back(ggml_backend_alloc_ctx_tensors_from_buft(wctx.back().get(), buft));
    if (!wbuf.back()) return Status::errorf("speed: cannot allocate {} weights", idx.size());
  }
  std::map<std::tuple<int, int64_t, int64_t>, std::vector<uint8_t>> data;
  for (size_t i = 0; i < chain.size(); ++i) {
    auto key = std::make_tuple(int(types[i]), chain[i].n_in, chain[i].n_out);
    auto it = data.find(key);
    if (it == data.end()) it = data.emplace(key, tiled_weight(types[i], chain[i].n_in, chain[i].n_out)).first;
    ggml_backend_tensor_set(w[i], it->second.data(), 0, it->second.size());
  }

  const size_t graph_size = chain.size() * 2 + 16;
  ggml_init_params cp = {ggml_tensor_overhead() * graph_size + ggml_graph_overhead_custom(graph_size, false), nullptr,
                         true};
  CtxPtr cctx(ggml_init(cp));
  std::map<int64_t, ggml_tensor*> xs;  // one activation per row width
  for (const auto& m : chain)
    if (!xs.count(m.n_in)) {
      ggml_tensor* x = ggml_new_tensor_2d(cctx.get(), GGML_TYPE_F32, m.n_in, batch);
      ggml_set_input(x);
      xs[m.n_in] = x;
    }
  ggml_cgraph* g = ggml_new_graph_custom(cctx.get(), graph_size, false);
  for (size_t i = 0; i < chain.size(); ++i) ggml_build_forward_expand(g, ggml_mul_mat(cctx.get(), w[i], xs[chain[i].n_in]));
  std::unique_ptr<ggml_gallocr, AllocrFree> alloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
  if (!ggml_gallocr_alloc_graph(alloc.get(), g)) return Status::error("speed: cannot allocate the timing graph");
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [n_in, x] : xs) {
    std::vector<float> xv(static_cast<size_t>(n_in * batch));
    for (auto& v : xv) v = nd(rng);
    ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
  }

  // Timed only while this process had its threads' worth of CPU. Another job's load deschedules
  // one of ggml's threads and the others wait for it at every node's barrier: measured, a Q5_0
  // kernel timed beside a test run read 50x slow, every run of it loaded, so the fastest run did
  // not help (and the cache kept it). The CPU share is read over a window of runs (a thread's CPU
  // time is accounted at scheduler ticks, so one millisecond run says nothing); a loaded window
  // is timed again after a pause, a few times at most, then returned marked loaded.
  constexpr double kMinShare = 0.8, kWindow = 0.1;
  constexpr int kAttempts = 4;
  if (ggml_backend_graph_compute(backend.get(), g) != GGML_STATUS_SUCCESS)  // warms the pages and the thread pool
    return Status::error("speed: ggml failed to compute the timing graph");
  double best = 0;
  for (int attempt = 0;; ++attempt) {
    best = 0;
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    double wall = 0;
    for (int r = 0; r < reps || wall < kWindow; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      if (ggml_backend_graph_compute(backend.get(), g) != GGML_STATUS_SUCCESS)
        return Status::error("speed: ggml failed to compute the timing graph");
      const auto t1 = std::chrono::steady_clock::now();
      const double s = std::chrono::duration<double>(t1 - t0).count();
      if (r == 0 || s < best) best = s;
      wall = std::chrono::duration<double>(t1 - w0).count();
    }
    const bool quiet = process_cpu_seconds() - c0 >= kMinShare * wall * threads;
    if (quiet || attempt + 1 == kAttempts) {
      if (loaded) *loaded = !quiet;
      return best;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

namespace {
Result<double> time_copies(const std::string& type, int64_t n_in, int64_t n_out, int64_t batch, int copies, int reps,
                           int threads, bool* loaded) {
  return time_chain(std::vector<MatSpec>(static_cast<size_t>(copies), MatSpec{type, n_in, n_out}), batch, reps, threads,
                    loaded);
}
}  // namespace

uint64_t llc_bytes() {
  // sysfs says what the CPU's caches are; glibc's sysconf reads cpuid, which a VM may report
  // ten times too large (320 MiB for this 32 MiB L3).
  uint64_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream lf(dir + "level"), sf(dir + "size");
    int level = 0;
    std::string size;
    if (!(lf >> level) || !(sf >> size) || size.empty()) continue;
    uint64_t v = std::strtoull(size.c_str(), nullptr, 10);
    const char unit = size.back();
    if (unit == 'K') v <<= 10;
    if (unit == 'M') v <<= 20;
    if (level > best_level && v > 0) best_level = level, best = v;
  }
  if (best_level >= 2) return best;
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<uint64_t>(l3) : (64ull << 20);
}

std::string kernel_signature() {
  std::string s = fmt::format("ggml {} {}", ggml_version(), ggml_commit());
  for (const auto& f : gm::llama::cpu_features())
    if (f.compiled && f.cpu) s += " " + f.name;
  s += gm::llama::model_params().use_extra_bufts ? " repack" : " no-repack";
  s += fmt::format(" llc={}", llc_bytes());
  s += " data=shuffled";  // timings of tiled data (before 2026-12-08) read too fast: measured again
  return s;
}

namespace {
// Decode streams: chains of at least 4x the last-level cache (and 64 MiB).
uint64_t stream_bytes() { return std::max<uint64_t>(4 * llc_bytes(), 64ull << 20); }
constexpr uint64_t kPrefillBytes = 16ull << 20;  // prompt processing is bound by arithmetic
}  // namespace

Result<KernelTime> time_matmul(const std::string& type_name, int64_t n_in, int64_t n_out, int threads,
                               bool decode_only) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type type, parse_type(type_name));
  if (n_in <= 0 || n_out <= 0 || n_in % ggml_blck_size(type) != 0)
    return Status::errorf("speed: {} cannot hold a {} x {} weight", type_name, n_in, n_out);
  if (threads < 1) return Status::error("speed: threads must be positive");
  const uint64_t bytes = ggml_row_size(type, n_in) * static_cast<uint64_t>(n_out);
  const int dcopies = static_cast<int>(std::clamp<uint64_t>((stream_bytes() + bytes - 1) / bytes, 1, 4096));
  const int pcopies = static_cast<int>(std::clamp<uint64_t>((kPrefillBytes + bytes - 1) / bytes, 1, 64));
  KernelTime k;
  bool dl = false, pl = false;
  GAMMA_ASSIGN_OR_RETURN(double d, time_copies(type_name, n_in, n_out, 1, dcopies, 9, threads, &dl));
  k.decode_us = d * 1e6 / dcopies;
  k.loaded = dl;
  if (decode_only) {
    k.prefill_us = k.decode_us;
    return k;
  }
  GAMMA_ASSIGN_OR_RETURN(double p, time_copies(type_name, n_in, n_out, kPrefillBatch, pcopies, 3, threads, &pl));
  k.prefill_us = p * 1e6 / pcopies;
  k.loaded = dl || pl;
  return k;
}

Result<KernelTime> time_layers(const std::string& type_name, const std::vector<MatSpec>& layer, int n_layer,
                               int threads) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type type, parse_type(type_name));
  std::vector<MatSpec> one;
  uint64_t bytes = 0;
  for (const auto& m : layer) {
    if (m.n_in % ggml_blck_size(type) != 0) continue;  // a shape this type cannot hold
    one.push_back({type_name, m.n_in, m.n_out});
    bytes += ggml_row_size(type, m.n_in) * static_cast<uint64_t>(m.n_out);
  }
  if (one.empty()) return Status::errorf("speed: {} holds no weight of the layer", type_name);
  auto chain_of = [&](uint64_t target) {
    const int k = static_cast<int>(std::clamp<uint64_t>((target + bytes - 1) / bytes, 1, uint64_t(std::max(1, n_layer))));
    std::vector<MatSpec> c;
    for (int i = 0; i < k; ++i) c.insert(c.end(), one.begin(), one.end());
    return std::make_pair(k, c);
  };
  KernelTime t;
  auto [kd, dchain] = chain_of(stream_bytes());
  bool dl = false, pl = false;
  GAMMA_ASSIGN_OR_RETURN(double d, time_chain(dchain, 1, 9, threads, &dl));
  t.decode_us = d * 1e6 / kd;
  auto [kp, pchain] = chain_of(kPrefillBytes);
  GAMMA_ASSIGN_OR_RETURN(double p, time_chain(pchain, kPrefillBatch, 3, threads, &pl));
  t.prefill_us = p * 1e6 / kp;
  t.loaded = dl || pl;
  return t;
}

}  // namespace gm::speed
