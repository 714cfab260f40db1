#include "speed/kernels.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
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


// Seconds per graph run of `copies` products W_i x (x: n_in x batch), the fastest of `reps`
// after one warm-up: on a shared machine the others' load only ever adds time, so the minimum
// is the kernel's own (llama-bench's side of the comparison is read the same way, speed.cpp). The weights hold one quantized block of random rows, tiled: the kernels do
// not branch on the values, and quantizing a whole matrix (minutes for IQ2 types) buys nothing.
Result<double> time_chain(ggml_type type, int64_t n_in, int64_t n_out, int64_t batch, int copies, int reps,
                          int threads) {
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
  std::vector<uint8_t> data(row_bytes * n_out);
  for (int64_t r = 0; r < n_out; r += block_rows) {
    const int64_t n = std::min(block_rows, n_out - r);
    std::copy(block.begin(), block.begin() + n * row_bytes, data.begin() + r * row_bytes);
  }

  std::unique_ptr<ggml_backend, BackendFree> backend(ggml_backend_cpu_init());
  if (!backend) return Status::error("speed: cannot start ggml's CPU backend");
  ggml_backend_cpu_set_n_threads(backend.get(), threads);

  ggml_init_params wp = {ggml_tensor_overhead() * (copies + 1), nullptr, true};
  CtxPtr wctx(ggml_init(wp));
  std::vector<ggml_tensor*> w(copies);
  for (auto& t : w) t = ggml_new_tensor_2d(wctx.get(), type, n_in, n_out);
  ggml_backend_buffer_type_t buft = weight_buft(w[0]);
  std::unique_ptr<ggml_backend_buffer, BufFree> wbuf(ggml_backend_alloc_ctx_tensors_from_buft(wctx.get(), buft));
  if (!wbuf) return Status::errorf("speed: cannot allocate {} weights of {} x {}", copies, n_in, n_out);
  for (auto* t : w) ggml_backend_tensor_set(t, data.data(), 0, data.size());

  const size_t graph_size = static_cast<size_t>(copies) * 2 + 16;
  ggml_init_params cp = {ggml_tensor_overhead() * graph_size + ggml_graph_overhead_custom(graph_size, false), nullptr,
                         true};
  CtxPtr cctx(ggml_init(cp));
  ggml_tensor* x = ggml_new_tensor_2d(cctx.get(), GGML_TYPE_F32, n_in, batch);
  ggml_set_input(x);
  ggml_cgraph* g = ggml_new_graph_custom(cctx.get(), graph_size, false);
  for (auto* t : w) ggml_build_forward_expand(g, ggml_mul_mat(cctx.get(), t, x));
  std::unique_ptr<ggml_gallocr, AllocrFree> alloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
  if (!ggml_gallocr_alloc_graph(alloc.get(), g)) return Status::error("speed: cannot allocate the timing graph");
  std::vector<float> xv(static_cast<size_t>(n_in * batch));
  for (auto& v : xv) v = nd(rng) * 50.f;
  ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (ggml_backend_graph_compute(backend.get(), g) != GGML_STATUS_SUCCESS)
      return Status::errorf("speed: ggml failed to multiply {} {} x {}", ggml_type_name(type), n_in, n_out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 1 || (r > 1 && s < best)) best = s;  // run 0 warms the pages and the thread pool
  }
  return best;
}

}  // namespace

uint64_t llc_bytes() {
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<uint64_t>(l3) : (64ull << 20);
}

double KernelTime::decode_in(uint64_t model_bytes) const {
  const double hit = model_bytes == 0 ? 1.0 : std::min(1.0, double(llc_bytes()) / double(model_bytes));
  return decode_us - hit * std::max(0.0, decode_us - decode_hot_us);
}

std::string kernel_signature() {
  std::string s = fmt::format("ggml {} {}", ggml_version(), ggml_commit());
  for (const auto& f : gm::llama::cpu_features())
    if (f.compiled && f.cpu) s += " " + f.name;
  s += gm::llama::model_params().use_extra_bufts ? " repack" : " no-repack";
  s += fmt::format(" llc={}", llc_bytes());
  return s;
}

Result<KernelTime> time_matmul(const std::string& type_name, int64_t n_in, int64_t n_out, int threads,
                               bool decode_only) {
  GAMMA_ASSIGN_OR_RETURN(ggml_type type, parse_type(type_name));
  if (n_in <= 0 || n_out <= 0 || n_in % ggml_blck_size(type) != 0)
    return Status::errorf("speed: {} cannot hold a {} x {} weight", type_name, n_in, n_out);
  if (threads < 1) return Status::error("speed: threads must be positive");
  gm::llama::init();
  const uint64_t bytes = ggml_row_size(type, n_in) * static_cast<uint64_t>(n_out);
  // Decode: enough copies to stream 4x the last-level cache (at least 64 MiB), at most 4096.
  const uint64_t stream = std::max<uint64_t>(4 * llc_bytes(), 64ull << 20);
  const int dcopies = static_cast<int>(std::clamp<uint64_t>((stream + bytes - 1) / bytes, 1, 4096));
  // Prompt processing: ~16 MiB of weights, at most 64 copies, 3 runs after the warm-up.
  const int pcopies = static_cast<int>(std::clamp<uint64_t>(((16ull << 20) + bytes - 1) / bytes, 1, 64));
  KernelTime k;
  GAMMA_ASSIGN_OR_RETURN(double d, time_chain(type, n_in, n_out, 1, dcopies, 9, threads));
  k.decode_us = d * 1e6 / dcopies;
  // Hot: copies that fit in half the last-level cache, so that they stay there between runs.
  const int hcopies = static_cast<int>(std::clamp<uint64_t>(llc_bytes() / 2 / bytes, 1, 4096));
  GAMMA_ASSIGN_OR_RETURN(double h, time_chain(type, n_in, n_out, 1, hcopies, 9, threads));
  k.decode_hot_us = std::min(k.decode_us, h * 1e6 / hcopies);
  if (decode_only) {
    k.prefill_us = k.decode_us;
    return k;
  }
  GAMMA_ASSIGN_OR_RETURN(double p, time_chain(type, n_in, n_out, kPrefillBatch, pcopies, 3, threads));
  k.prefill_us = p * 1e6 / pcopies;
  return k;
}

}  // namespace gm::speed
