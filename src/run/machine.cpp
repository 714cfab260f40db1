// This machine against the reference machine the estimates are priced on (estimate.cpp): the
// dry run's figures came within 4 % of the 880MiB job on the 2-core AMD EPYC they were fitted
// on, and its first stages ran 1.2-1.4x slower on the next machine (an Intel Xeon with the same
// two cores), so a plan of work in the reference's seconds misleads any other CPU. Two probes,
// each priced by the very functions that price the stages: quantizing a sample of rows of the
// model's first layer at every pool type (the pool, the estimate and llama-quantize's mixes
// scale with it), and a forward pass over two chunks of the calibration text (imatrix, evals,
// HAWQ-V2, Stage I). Measured once per model, CPU and thread count, kept in gamma's cache.
#include <chrono>
#include <cmath>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

#include "gguf_model/model.h"
#include "pool/quantize.h"
#include "run/pipeline.h"
#include "run/proc.h"
#include "speed/kernels.h"
#include "util/data.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace gm::run {
namespace {

constexpr int kProbeRows = 256;   // rows per module quantized (all of a smaller module)
constexpr int kProbeChunks = 2;   // chunks of the forward probe

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Quantizing: every candidate type of the first layer's modules, kProbeRows evenly spaced rows
// each, with an importance vector of ones (the IQ2 types need one; the pool always has one in
// gamma run). Returns (measured, predicted) seconds.
Result<std::pair<double, double>> quantize_probe(const Env& e, const Manifest& preview) {
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(e.model));
  ModelSize ref = e.ms;
  ref.quantize_scale = ref.forward_scale = 1;
  const int layer = preview.modules.empty() ? -1 : preview.modules.front().layer;
  double measured = 0, predicted = 0;
  for (const auto& m : preview.modules) {
    if (m.layer != layer) continue;
    const TensorInfo& t = model->tensor(m.name);
    const int64_t n = std::min<int64_t>(kProbeRows, t.n_rows());
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) rows.push_back(i * t.n_rows() / n);
    GAMMA_ASSIGN_OR_RETURN(std::vector<float> x, model->read_rows_f32(t, rows));
    const std::vector<float> ones(size_t(t.row_width()), 1.0f);
    for (const auto& c : m.candidates) {
      GAMMA_ASSIGN_OR_RETURN(ggml_type type, parse_type(c.type));
      if (type == t.type) continue;  // the source's own bytes: copied, not quantized, by the pool
      const auto t0 = std::chrono::steady_clock::now();
      (void)quantize_rows(type, x.data(), n, t.row_width(), ones.data(), ref.threads);
      measured += seconds_since(t0);
      predicted += pool_type_seconds(ref, c.type, double(n * t.row_width()));
    }
  }
  return std::make_pair(measured, predicted);
}

// A forward pass: gamma eval of the source over kProbeChunks chunks (perplexity only).
Result<std::pair<double, double>> forward_probe(const Env& e) {
  ModelSize ref = e.ms;
  ref.quantize_scale = ref.forward_scale = 1;
  const std::string text = e.o.calib.empty() ? default_calibration_parts().front().path : e.o.calib;
  const std::string out = fmt::format("{}/machine/probe-{}.json", cache_dir(), ::getpid());
  const auto t0 = std::chrono::steady_clock::now();
  Status st = run_tool("machine probe (gamma eval)",
                       {e.G, "eval", e.model, "--text", text, "--ctx", std::to_string(e.o.eval_ctx), "--chunks",
                        std::to_string(kProbeChunks), "-t", e.T, "-q", "-o", out},
                       cache_dir() + "/machine/probe.log");
  const double took = seconds_since(t0);
  std::error_code ec;
  fs::remove(out, ec);
  GAMMA_RETURN_IF_ERROR(st);
  return std::make_pair(took, eval_seconds(ref, double(kProbeChunks) * e.o.eval_ctx, true));
}

}  // namespace

Status calibrate_machine(Env& e, const Manifest& preview) {
  const std::string sig = fmt::format("{} threads={} model={}", speed::kernel_signature(), e.ms.threads,
                                      preview.model_fingerprint);
  const std::string path =
      cache_dir() + "/machine/" + sha256_hex(sig.data(), sig.size()).substr(0, 16) + ".json";
  if (auto j = read_json(path, "gamma.machine", 1); j.is_ok() && j->value("signature", "") == sig) {
    e.ms.quantize_scale = j->value("quantize_scale", 1.0);
    e.ms.forward_scale = j->value("forward_scale", 1.0);
    std::printf("this machine: quantizing %.2fx, forward passes %.2fx the reference's time (measured before: %s)\n",
                e.ms.quantize_scale, e.ms.forward_scale, path.c_str());
    return Status::ok();
  }
  std::error_code ec;
  fs::create_directories(cache_dir() + "/machine", ec);
  const auto t0 = std::chrono::steady_clock::now();
  GAMMA_ASSIGN_OR_RETURN(auto q, quantize_probe(e, preview));
  GAMMA_ASSIGN_OR_RETURN(auto f, forward_probe(e));
  // A probe too short to time (a tiny model's layer) keeps the reference's figures.
  auto ratio = [](std::pair<double, double> p) {
    return p.second > 0.05 && std::isfinite(p.first / p.second) && p.first > 0 ? p.first / p.second : 1.0;
  };
  e.ms.quantize_scale = ratio(q);
  e.ms.forward_scale = ratio(f);
  json j = json_header("gamma.machine", 1);
  j["signature"] = sig;
  j["quantize_scale"] = e.ms.quantize_scale;
  j["forward_scale"] = e.ms.forward_scale;
  j["quantize_probe"] = {{"seconds", q.first}, {"reference_seconds", q.second}};
  j["forward_probe"] = {{"seconds", f.first}, {"reference_seconds", f.second}};
  (void)write_json(path, j);  // a cache that cannot be written is only a cost
  std::printf("this machine: quantizing %.2fx, forward passes %.2fx the reference's time (probes: %.0f s)\n",
              e.ms.quantize_scale, e.ms.forward_scale, seconds_since(t0));
  return Status::ok();
}

}  // namespace gm::run
