// This machine against the reference machine the estimates are priced on (estimate.cpp): the
// dry run's figures came within 4 % of the 880MiB job on the 2-core AMD EPYC they were fitted
// on; on the next machine (an Intel Xeon with two cores) its pool quantized at 0.5-0.97x the
// per-type figures, so a plan of work in the reference's seconds misleads another CPU. Two probes,
// each priced by the very functions that price the stages: quantizing a sample of rows of the
// model's first layer at every pool type (the pool, the estimate and llama-quantize's mixes
// scale with it), and llama-imatrix over four chunks of wiki.valid.tokens (imatrix, evals,
// HAWQ-V2, Stage I). Measured once per model, CPU and thread count, kept in gamma's cache.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

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
constexpr int kProbeChunks = 4;   // chunks of the forward probe

// The model's figures on the reference machine (every scale 1): what the probes are priced at.
ModelSize reference(ModelSize m) {
  m.quantize_scale = m.forward_scale = m.torch_scale = m.hawq_scale = 1;
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Quantizing: every candidate type of the first layer's modules, kProbeRows evenly spaced rows
// each, with an importance vector of ones (the IQ2 types need one; the pool always has one in
// gamma run). Returns (measured, predicted) seconds.
Result<std::pair<double, double>> quantize_probe(const Env& e, const Manifest& preview) {
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(e.model));
  const ModelSize ref = reference(e.ms);
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
      // The IQ types' grids are built at their first use (seconds, once per process): the pool
      // pays that once over the whole model, so it is left out of the sample.
      ggml_quantize_init(type);
      const auto t0 = std::chrono::steady_clock::now();
      (void)quantize_rows(type, x.data(), n, t.row_width(), ones.data(), ref.threads);
      measured += seconds_since(t0);
      predicted += pool_type_seconds(ref, c.type, double(n * t.row_width()));
    }
  }
  return std::make_pair(measured, predicted);
}

// A forward pass: llama-imatrix over kProbeChunks chunks of the source, the first forward stage
// of every run. On the Xeon it read Qwen-1.5B at 0.96x the reference, and the default job's
// HAWQ-V2 traces (LibTorch) took 0.95x; gamma eval of the source, tried first, read 1.15-1.23x,
// its tokenizing and loading a larger share of two chunks.
Result<std::pair<double, double>> forward_probe(const Env& e) {
  const ModelSize ref = reference(e.ms);
  const std::string out = fmt::format("{}/machine/probe-{}.gguf", cache_dir(), ::getpid());
  const auto t0 = std::chrono::steady_clock::now();
  Status st = run_tool("machine probe (llama-imatrix)",
                       {e.o.llama_bin + "/llama-imatrix", "-m", e.model, "-f", validation_text_source("wiki"), "-c",
                        std::to_string(e.o.eval_ctx), "--chunks", std::to_string(kProbeChunks), "-t", e.T, "-o", out},
                       cache_dir() + "/machine/probe.log");
  const double took = seconds_since(t0);
  std::error_code ec;
  fs::remove(out, ec);
  GAMMA_RETURN_IF_ERROR(st);
  return std::make_pair(took, imatrix_seconds(ref, double(kProbeChunks) * e.o.eval_ctx));
}

// The kind of work a stage of gamma run is, by its name (env.cpp's stage lines); "" for those
// too small or too unlike any kind to price a machine by (dequantize, solve + emit, ...).
std::string stage_kind(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("estimate") || starts("pool") || starts("llama-quantize")) return "quantize";
  if (starts("llama-imatrix") || starts("eval") || starts("layers")) return "forward";
  // HAWQ-V2's Hutchinson probes and Stage I's steps are both LibTorch, but their speeds on one
  // machine differ by more than the estimate may (Xeon: 0.52x and 0.83x the reference's figures).
  if (starts("hawq")) return "hawq";
  if (starts("learn")) return "torch";
  return "";
}

// Stages shorter than this say more about loading than about the machine.
constexpr double kMinStageS = 60;

double& scale_of(ModelSize& m, const std::string& kind) {
  return kind == "quantize" ? m.quantize_scale
         : kind == "forward" ? m.forward_scale
         : kind == "hawq"    ? m.hawq_scale
                             : m.torch_scale;
}

// Each kind's scale from the file: the probes, then, where earlier runs' stages measured a kind,
// their geometric mean weighted by each stage's estimate (what each stage took over what the
// reference's figures priced it at). Returns how many stages served.
int apply_scales(const json& j, ModelSize& m) {
  m.quantize_scale = j.value("quantize_scale", 1.0);
  m.forward_scale = j.value("forward_scale", 1.0);
  m.torch_scale = j.value("torch_scale", m.forward_scale);
  std::map<std::string, std::pair<double, double>> acc;  // kind -> (sum w log r, sum w)
  int n = 0;
  for (const auto& st : j.value("stages", json::array())) {
    // By the stage's name where it has one: records of earlier gammas filed HAWQ-V2 under "torch".
    const std::string named = stage_kind(st.value("stage", ""));
    const std::string kind = named.empty() ? st.value("kind", "") : named;
    const double sec = st.value("seconds", 0.0), est = st.value("estimate_seconds", 0.0), used = st.value("scale", 0.0);
    if (kind.empty() || sec <= 0 || est <= 0 || used <= 0) continue;
    const double ref = est / used;  // the reference's figure for this stage
    acc[kind].first += ref * std::log(sec / ref);
    acc[kind].second += ref;
    ++n;
  }
  // Without a HAWQ-V2 stage of its own, it takes LibTorch's scale (probes or Stage I's stages).
  if (!acc.count("hawq")) m.hawq_scale = acc.count("torch") ? std::exp(acc["torch"].first / acc["torch"].second) : m.torch_scale;
  for (const auto& [kind, a] : acc) scale_of(m, kind) = std::exp(a.first / a.second);
  return n;
}

}  // namespace

Status calibrate_machine(Env& e, const Manifest& preview) {
  const std::string sig = fmt::format("{} threads={} model={}", speed::kernel_signature(), e.ms.threads,
                                      preview.model_fingerprint);
  e.machine = cache_dir() + "/machine/" + sha256_hex(sig.data(), sig.size()).substr(0, 16) + ".json";
  json j;
  std::string how;
  if (auto old = read_json(e.machine, "gamma.machine", 1); old.is_ok() && old->value("signature", "") == sig) {
    j = *old;
    how = "measured before";
  } else {
    std::error_code ec;
    fs::create_directories(cache_dir() + "/machine", ec);
    const auto t0 = std::chrono::steady_clock::now();
    GAMMA_ASSIGN_OR_RETURN(auto q, quantize_probe(e, preview));
    GAMMA_ASSIGN_OR_RETURN(auto f, forward_probe(e));
    // A probe too short to time (a tiny model's layer) keeps the reference's figures.
    auto ratio = [](std::pair<double, double> p) {
      return p.second > 0.05 && std::isfinite(p.first / p.second) && p.first > 0 ? p.first / p.second : 1.0;
    };
    j = json_header("gamma.machine", 1);
    j["signature"] = sig;
    j["quantize_scale"] = ratio(q);
    j["forward_scale"] = ratio(f);
    j["quantize_probe"] = {{"seconds", q.first}, {"reference_seconds", q.second}};
    j["forward_probe"] = {{"seconds", f.first}, {"reference_seconds", f.second}};
    j["stages"] = json::array();
    (void)write_json(e.machine, j);  // a cache that cannot be written is only a cost
    how = fmt::format("probes: {:.0f} s", seconds_since(t0));
  }
  const int n = apply_scales(j, e.ms);
  std::printf("this machine: quantizing %.2fx, ggml passes %.2fx, LibTorch passes %.2fx (HAWQ-V2's %.2fx) the "
              "reference's time (%s%s; %s)\n",
              e.ms.quantize_scale, e.ms.forward_scale, e.ms.torch_scale, e.ms.hawq_scale, how.c_str(),
              n ? fmt::format(", {} stage{} of earlier runs", n, n == 1 ? "" : "s").c_str() : "", e.machine.c_str());
  return Status::ok();
}

bool shared_machine(const Env& e, double other_cores) {
  const double cores = double(std::max(1u, std::thread::hardware_concurrency()));
  return other_cores > std::max(0.0, cores - double(e.ms.threads)) + 0.25;
}

void record_stage(const Env& e, const std::string& name, double estimate_s, double seconds, double other_cores) {
  const std::string kind = stage_kind(name);
  if (e.machine.empty() || kind.empty() || estimate_s < kMinStageS || shared_machine(e, other_cores)) return;
  auto j = read_json(e.machine, "gamma.machine", 1);
  if (!j.is_ok()) return;
  ModelSize m = e.ms;
  (*j)["stages"].push_back({{"stage", name}, {"kind", kind}, {"seconds", seconds}, {"estimate_seconds", estimate_s},
                            {"scale", scale_of(m, kind)}});
  (void)write_json(e.machine, *j);
}

}  // namespace gm::run
