#include "speed/speed.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "gguf_model/model.h"
#include "gguf_model/writer.h"
#include "util/files.h"
#include "util/proc.h"
#include "util/stats.h"

namespace gm::speed {
namespace {

std::string kernel_key(const std::string& type, int64_t n_in, int64_t n_out, bool head) {
  return fmt::format("{} {} {}{}", type, n_in, n_out, head ? " head" : "");
}

json time_json(const KernelTime& k) { return json{{"decode_us", k.decode_us}, {"prefill_us", k.prefill_us}}; }
KernelTime time_from(const json& j) {
  KernelTime k;
  k.decode_us = j.at("decode_us").get<double>();
  k.prefill_us = j.at("prefill_us").get<double>();
  for (double v : {k.decode_us, k.prefill_us})
    if (!(v > 0 && std::isfinite(v))) throw std::invalid_argument("a kernel time is not a positive number");
  return k;
}
json rest_json(const Rest& r) {
  return json{{"decode_us", r.decode_us},
              {"prefill_us", r.prefill_us},
              {"reference", r.reference},
              {"reference_tg128", r.reference_bench.decode_tps},
              {"reference_pp512", r.reference_bench.prefill_tps}};
}
Rest rest_from(const json& j) {
  Rest r;
  r.decode_us = j.at("decode_us").get<double>();
  r.prefill_us = j.at("prefill_us").get<double>();
  r.reference = j.at("reference").get<std::string>();
  r.reference_bench.decode_tps = j.at("reference_tg128").get<double>();
  r.reference_bench.prefill_tps = j.at("reference_pp512").get<double>();
  return r;
}

// The one limit of the model: a MoE's 3-D expert weights cost per expert a token uses.
Status priced(const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.size() == 2) return Status::ok();
  return Status::errorf("speed: {} is {}-D (experts): the speed model prices 2-D weights only", name, shape.size());
}

// The tensors llama.cpp multiplies by: the linear modules and the head.
std::string head_name(const Model& m) { return m.tied_embeddings() ? "token_embd.weight" : "output.weight"; }

}  // namespace

Result<std::vector<Weight>> weights_of(const Model& m) {
  std::vector<Weight> ws;
  for (const auto& l : m.linear()) {
    const TensorInfo& t = m.tensors().at(l.tensor);
    GAMMA_RETURN_IF_ERROR(priced(t.name, t.shape));
    ws.push_back({t.name, type_name(t.type), t.shape[0], t.shape[1], false});
  }
  const int64_t h = m.find(head_name(m));
  if (h < 0) return Status::errorf("speed: {} has no output head", m.path());
  const TensorInfo& t = m.tensors().at(static_cast<size_t>(h));
  ws.push_back({t.name, type_name(t.type), t.shape.at(0), t.n_rows(), true});
  return ws;
}

Result<Weight> head_of(const Manifest& m) {
  const std::string name = output_head(m);
  for (const auto& f : m.fixed)
    if (f.name == name && f.shape.size() >= 2)
      return Weight{name, f.source_type, f.shape[0], f.shape[1], true};
  return Status::errorf("speed: the pool has no output head ({})", name);
}

Result<std::vector<Weight>> weights_of(const Manifest& m, const Plan& p) {
  GAMMA_RETURN_IF_ERROR(p.validate(m));
  std::vector<Weight> ws;
  for (const auto& e : m.modules) {
    GAMMA_RETURN_IF_ERROR(priced(e.name, e.shape));
    const Candidate* c = e.find(p.modules.at(e.name));
    ws.push_back({e.name, c->type, e.shape[0], e.shape[1], false});
  }
  GAMMA_ASSIGN_OR_RETURN(Weight head, head_of(m));
  head.type = plan_fixed_types(m, p).at(head.name);
  ws.push_back(head);
  return ws;
}

Result<Speed> bench(const std::string& llama_bench, const std::string& gguf, int threads, int reps) {
  if (!file_exists(llama_bench)) return Status::errorf("{}: no such file (llama-bench)", llama_bench);
  json j;
  std::string out;
  Status failed;
  // Up to three tries: llama.cpp's tools here now and then end with their output cut short
  // (tests/testing.h retries them the same way).
  for (int attempt = 0; attempt < 3 && !j.is_array(); ++attempt) {
    auto r = capture({llama_bench, "-m", gguf, "-t", std::to_string(threads), "-p", std::to_string(kPrefillBatch), "-n",
                      "128", "-r", std::to_string(reps), "-o", "json"});
    if (!r.is_ok()) {
      failed = r.status();
      continue;
    }
    out = *r;
    // llama-bench prints its log lines (stderr, captured too) before the JSON array.
    const size_t at = out.find("[\n");
    j = json::parse(at == std::string::npos ? std::string() : out.substr(at), nullptr, false);
  }
  if (!j.is_array() && !failed.is_ok() && out.empty()) return failed;
  if (!j.is_array()) return Status::errorf("llama-bench on {} printed no results: {}", gguf, out.substr(0, 300));
  // The fastest repetition: another process's load only slows a run down (kernels.cpp too).
  Speed s;
  for (const auto& row : j) {
    const int64_t np = row.value("n_prompt", int64_t{0}), ng = row.value("n_gen", int64_t{0});
    double ts = 0;
    for (const auto& v : row.value("samples_ts", json::array()))
      if (v.is_number()) ts = std::max(ts, v.get<double>());
    if (np == kPrefillBatch && ng == 0) s.prefill_tps = ts;
    if (np == 0 && ng == 128) s.decode_tps = ts;
  }
  if (!(s.decode_tps > 0 && s.prefill_tps > 0)) return Status::errorf("llama-bench on {}: no tg128/pp512 rows", gguf);
  return s;
}

Result<CostModel> CostModel::open(int threads) {
  if (threads < 1) return Status::error("speed: threads must be positive");
  CostModel cm;
  cm.threads_ = threads;
  cm.signature_ = kernel_signature() + fmt::format(" threads={}", threads);
  const std::string dir = cache_dir() + "/speed";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  cm.path_ = dir + "/" + sha256_hex(cm.signature_.data(), cm.signature_.size()).substr(0, 24) + ".json";
  if (!file_exists(cm.path_)) return cm;
  // A cache that cannot be read is measured again, not trusted.
  auto j = read_json(cm.path_, "gamma.speed.cache", 1);
  if (!j.is_ok()) return cm;
  try {
    if (j.value().at("signature").get<std::string>() != cm.signature_) return cm;
    for (const auto& [k, v] : j.value().at("kernels").items()) cm.kernels_[k] = time_from(v);
    for (const auto& [k, v] : j.value().at("rests").items()) cm.rests_[k] = rest_from(v);
    for (const auto& [k, v] : j.value().at("scales").items()) cm.scales_[k] = time_from(v);
    if (j.value().contains("probes"))
      for (const auto& [k, v] : j.value().at("probes").items()) cm.probes_[k] = time_from(v);
  } catch (const std::exception&) {
    cm.kernels_.clear();
    cm.rests_.clear();
    cm.scales_.clear();
    cm.probes_.clear();
  }
  return cm;
}

Status CostModel::save() const {
  json j = json_header("gamma.speed.cache", 1);
  j["signature"] = signature_;
  json k = json::object(), r = json::object(), sc = json::object(), pr = json::object();
  for (const auto& [key, t] : kernels_) k[key] = time_json(t);
  for (const auto& [key, rest] : rests_) r[key] = rest_json(rest);
  for (const auto& [key, t] : scales_) sc[key] = time_json(t);
  for (const auto& [key, t] : probes_) pr[key] = time_json(t);
  j["kernels"] = k;
  j["rests"] = r;
  j["scales"] = sc;
  j["probes"] = pr;
  return write_json(path_, j);
}

Result<KernelTime> CostModel::kernel(const std::string& type, int64_t n_in, int64_t n_out, bool head) {
  const std::string key = kernel_key(type, n_in, n_out, head);
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  if (auto it = unsaved_.find(key); it != unsaved_.end()) return it->second;
  GAMMA_ASSIGN_OR_RETURN(KernelTime k, time_matmul(type, n_in, n_out, threads_, head));
  return keep(key, k, kernels_);
}

namespace {
// One order for a layer's shapes, whoever lists them (a GGUF's tensor order, a manifest's).
void sort_shapes(Layer* l) {
  std::sort(l->shapes.begin(), l->shapes.end(),
            [](const MatSpec& a, const MatSpec& b) { return std::tie(a.n_in, a.n_out) < std::tie(b.n_in, b.n_out); });
}
}  // namespace

Layer layer_of(const std::vector<Weight>& ws) {
  Layer l;
  std::set<std::string> blocks;
  for (const auto& w : ws) {
    if (w.head || w.name.rfind("blk.", 0) != 0) continue;
    blocks.insert(w.name.substr(0, w.name.find('.', 4)));
    if (w.name.rfind("blk.0.", 0) == 0) l.shapes.push_back({"", w.n_in, w.n_out});
  }
  l.n_layer = static_cast<int>(blocks.size());
  sort_shapes(&l);
  return l;
}

Layer layer_of(const Manifest& m) {
  Layer l;
  for (const auto& e : m.modules)
    if (e.layer == 0 && e.shape.size() == 2) l.shapes.push_back({"", e.shape[0], e.shape[1]});
  l.n_layer = m.n_layer;
  sort_shapes(&l);
  return l;
}

Result<KernelTime> CostModel::type_scale(const std::string& type, const Layer& layer) {
  std::string key = fmt::format("scale {} {}", type, layer.n_layer);
  for (const auto& m : layer.shapes) key += fmt::format(" {}x{}", m.n_in, m.n_out);
  if (auto it = scales_.find(key); it != scales_.end()) return it->second;
  if (auto it = unsaved_.find(key); it != unsaved_.end()) return it->second;
  GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(type));
  // The layers in context and the same kernels alone, measured in turns and each the fastest of
  // three: measured minutes apart, a slow phase of this shared machine in one of them moved the
  // ratio by 30 %.
  KernelTime ctx{1e300, 1e300}, alone{1e300, 1e300};
  bool loaded = false;
  for (int round = 0; round < 3; ++round) {
    GAMMA_ASSIGN_OR_RETURN(KernelTime c, time_layers(type, layer.shapes, layer.n_layer, threads_));
    loaded |= c.loaded;
    KernelTime a;
    for (const auto& m : layer.shapes) {
      if (m.n_in % ggml_blck_size(t) != 0) continue;
      GAMMA_ASSIGN_OR_RETURN(KernelTime k, time_matmul(type, m.n_in, m.n_out, threads_));
      a.decode_us += k.decode_us;
      a.prefill_us += k.prefill_us;
      loaded |= k.loaded;
    }
    ctx = {std::min(ctx.decode_us, c.decode_us), std::min(ctx.prefill_us, c.prefill_us)};
    alone = {std::min(alone.decode_us, a.decode_us), std::min(alone.prefill_us, a.prefill_us)};
  }
  KernelTime scale{ctx.decode_us / alone.decode_us, ctx.prefill_us / alone.prefill_us, loaded};
  if (!(scale.decode_us > 0 && scale.prefill_us > 0 && std::isfinite(scale.decode_us) && std::isfinite(scale.prefill_us)))
    return Status::errorf("speed: {} in context measured no time", type);
  return keep(key, scale, scales_);
}

Result<KernelTime> CostModel::keep(const std::string& key, const KernelTime& k, std::map<std::string, KernelTime>& saved) {
  if (k.loaded) {
    // Kept for this process only: the next one times it again, on a quieter machine perhaps.
    if (unsaved_.empty())
      std::fprintf(stderr, "gamma: warning: other jobs held this machine's cores while kernels were timed (%s): those "
                   "times are likely slow and are not cached\n", key.c_str());
    unsaved_[key] = k;
    return k;
  }
  saved[key] = k;
  GAMMA_RETURN_IF_ERROR(save());
  return k;
}

Result<KernelTime> CostModel::chain_price(const std::string& type, int64_t n_in, int64_t n_out, const Layer& layer) {
  GAMMA_ASSIGN_OR_RETURN(KernelTime k, kernel(type, n_in, n_out));
  if (layer.shapes.empty()) return k;
  GAMMA_ASSIGN_OR_RETURN(KernelTime s, type_scale(type, layer));
  return KernelTime{k.decode_us * s.decode_us, k.prefill_us * s.prefill_us};
}

Result<KernelTime> CostModel::module(const std::string& type, int64_t n_in, int64_t n_out, const Layer& layer) {
  GAMMA_ASSIGN_OR_RETURN(KernelTime k, chain_price(type, n_in, n_out, layer));
  if (auto it = factor_.find(type); it != factor_.end()) {
    k.decode_us *= it->second.decode_us;
    k.prefill_us *= it->second.prefill_us;
  }
  return k;
}

Result<KernelTime> CostModel::weights_time(const std::vector<Weight>& ws) {
  const Layer layer = layer_of(ws);
  KernelTime sum;
  for (const auto& w : ws) {
    KernelTime k;
    if (w.head) {
      GAMMA_ASSIGN_OR_RETURN(k, kernel(w.type, w.n_in, w.n_out, true));
    } else {
      GAMMA_ASSIGN_OR_RETURN(k, module(w.type, w.n_in, w.n_out, layer));
    }
    sum.decode_us += k.decode_us;
    sum.prefill_us += k.prefill_us;
  }
  return sum;
}

namespace {
bool holds(ggml_type t, const Weight& w) { return !w.head && w.n_in % ggml_blck_size(t) == 0; }

// The probe of `type`: `ref` with every linear module the type can hold at that type (tiled
// random blocks), every other tensor as it is.
Status write_probe(const Model& ref, const std::vector<Weight>& ws, ggml_type type, const std::string& out) {
  std::set<std::string> at;
  for (const auto& w : ws)
    if (holds(type, w)) at.insert(w.name);
  auto writer = model_writer(ref, [&](const TensorInfo& t) { return at.count(t.name) ? type : t.type; });
  return writer->write(out, [&](size_t i, std::vector<uint8_t>& buf) -> Status {
    const TensorInfo& t = ref.tensors().at(i);
    if (at.count(t.name)) {
      buf = tiled_weight(type, t.shape[0], t.n_rows());
      return Status::ok();
    }
    GAMMA_RETURN_IF_ERROR(ref.check_fits_memory(t));
    buf.resize(t.nbytes);
    return ref.read_raw(t, buf.data());
  });
}

// Solves a x = b (n <= a few dozen) by Gaussian elimination with partial pivoting.
Result<std::vector<double>> solve_dense(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (!(std::fabs(a[p][c]) > 1e-12)) return Status::error("speed: the probes do not determine the types' factors");
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t c = n; c-- > 0;) {
    double v = b[c];
    for (size_t k = c + 1; k < n; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return x;
}

// The least a type's probe factor may be: llama.cpp 4x faster than the type's kernels timed in
// ggml chains is a mis-measurement, not a kernel (measured factors: 0.42-2.6, SmolLM2).
constexpr double kMinFactor = 0.25;

// How many files a check measures between two measurements of the reference: 2 costs half a
// llama-bench a file more, and each file is next to one.
constexpr size_t kPairOf = 2;

// The rest and the factors (x = rest, factor...) nearest to the measured files' times within the
// bounds (rest >= 0, factor >= kMinFactor): least squares of each file's predicted time over its
// measured time, plus 1e-4 x each factor's distance from 1 squared; Lawson-Hanson non-negative
// least squares on the shifted variables. `a` is files x types (chain prices), `b` the times less
// the head's, `time` the times.
Result<std::vector<double>> fit_within_bounds(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                                              const std::vector<double>& time) {
  const size_t n = a.size(), cols = 1 + n;
  const double reg = 1e-2;  // sqrt(1e-4)
  std::vector<std::vector<double>> m;  // rows of the scaled system
  std::vector<double> y;
  for (size_t f = 0; f < n; ++f) {
    std::vector<double> row(cols);
    row[0] = 1 / time[f];
    for (size_t k = 0; k < n; ++k) row[1 + k] = a[f][k] / time[f];
    m.push_back(row);
    y.push_back(b[f] / time[f]);
  }
  for (size_t k = 0; k < n; ++k) {
    std::vector<double> row(cols);
    row[1 + k] = reg;
    m.push_back(row);
    y.push_back(reg);
  }
  std::vector<double> low(cols, kMinFactor);
  low[0] = 0;
  for (size_t r = 0; r < m.size(); ++r)  // x = low + z, z >= 0
    for (size_t c = 0; c < cols; ++c) y[r] -= m[r][c] * low[c];
  auto gradient = [&](const std::vector<double>& z) {  // m'(y - m z)
    std::vector<double> w(cols, 0.0);
    for (size_t r = 0; r < m.size(); ++r) {
      double res = y[r];
      for (size_t c = 0; c < cols; ++c) res -= m[r][c] * z[c];
      for (size_t c = 0; c < cols; ++c) w[c] += m[r][c] * res;
    }
    return w;
  };
  // Least squares on the passive columns, the others at 0.
  auto solve_on = [&](const std::vector<bool>& passive) -> Result<std::vector<double>> {
    std::vector<size_t> idx;
    for (size_t c = 0; c < cols; ++c)
      if (passive[c]) idx.push_back(c);
    std::vector<std::vector<double>> ata(idx.size(), std::vector<double>(idx.size(), 0.0));
    std::vector<double> aty(idx.size(), 0.0);
    for (size_t r = 0; r < m.size(); ++r)
      for (size_t i = 0; i < idx.size(); ++i) {
        aty[i] += m[r][idx[i]] * y[r];
        for (size_t j = 0; j < idx.size(); ++j) ata[i][j] += m[r][idx[i]] * m[r][idx[j]];
      }
    GAMMA_ASSIGN_OR_RETURN(std::vector<double> s, solve_dense(ata, aty));
    std::vector<double> full(cols, 0.0);
    for (size_t i = 0; i < idx.size(); ++i) full[idx[i]] = s[i];
    return full;
  };
  std::vector<double> z(cols, 0.0);
  std::vector<bool> passive(cols, false);
  for (size_t iter = 0; iter < 3 * cols; ++iter) {
    const std::vector<double> w = gradient(z);
    size_t j = cols;
    for (size_t c = 0; c < cols; ++c)
      if (!passive[c] && w[c] > 1e-12 && (j == cols || w[c] > w[j])) j = c;
    if (j == cols) break;
    passive[j] = true;
    for (size_t inner = 0; inner <= cols; ++inner) {  // each pass but the last frees a column
      GAMMA_ASSIGN_OR_RETURN(std::vector<double> s, solve_on(passive));
      double alpha = 1;
      for (size_t c = 0; c < cols; ++c)
        if (passive[c] && s[c] <= 0) alpha = std::min(alpha, z[c] - s[c] > 0 ? z[c] / (z[c] - s[c]) : 0.0);
      for (size_t c = 0; c < cols; ++c) z[c] += alpha * (s[c] - z[c]);
      if (alpha == 1) break;
      for (size_t c = 0; c < cols; ++c)
        if (passive[c] && z[c] <= 1e-15) passive[c] = false, z[c] = 0;
    }
  }
  for (size_t c = 0; c < cols; ++c) z[c] += low[c];
  return z;
}

}  // namespace

size_t bench_runs(size_t files) { return 1 + files + (files + kPairOf - 1) / kPairOf; }

Status CostModel::measure_probes(const std::string& llama_bench, const Model& model, const std::string& sha, int reps,
                                 const std::vector<std::string>& types, int rounds,
                                 const std::vector<std::string>& check, std::vector<Speed>* measured) {
  const std::string& reference = model.path();
  GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(model));
  const Layer layer = layer_of(ws);
  // The reference's chain prices (all kernels are timed before any llama-bench run).
  KernelTime head;
  std::vector<KernelTime> own(ws.size());
  std::map<std::string, double> share;
  for (size_t i = 0; i < ws.size(); ++i) {
    const Weight& w = ws[i];
    if (w.head) {
      GAMMA_ASSIGN_OR_RETURN(head, kernel(w.type, w.n_in, w.n_out, true));
      continue;
    }
    GAMMA_ASSIGN_OR_RETURN(own[i], chain_price(w.type, w.n_in, w.n_out, layer));
    share[w.type] += own[i].decode_us;
  }
  if (share.empty()) return Status::errorf("speed: {} has no linear module to price", reference);
  const std::string dominant =
      std::max_element(share.begin(), share.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  std::set<std::string> wanted(types.begin(), types.end());
  for (const auto& [t, s] : share) wanted.insert(t);
  std::vector<std::string> probed;
  std::vector<ggml_type> probed_t;
  std::vector<std::vector<std::optional<KernelTime>>> at;  // per probe, per weight: the price at its type
  for (const auto& name : wanted) {
    if (name == dominant) continue;
    GAMMA_ASSIGN_OR_RETURN(ggml_type t, parse_type(name));
    std::vector<std::optional<KernelTime>> p(ws.size());
    bool any = false;
    for (size_t i = 0; i < ws.size(); ++i)
      if (holds(t, ws[i])) {
        GAMMA_ASSIGN_OR_RETURN(KernelTime k, chain_price(name, ws[i].n_in, ws[i].n_out, layer));
        p[i] = k;
        any = true;
      }
    if (!any) continue;  // a type that holds none of this model's modules costs nothing here
    probed.push_back(name);
    probed_t.push_back(t);
    at.push_back(std::move(p));
  }
  const std::string dir = cache_dir() + "/speed-probes";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // A probe is written just before each llama-bench of it and removed after: the disk holds one
  // probe, the reference's size, not all of them (9.0 GB for Qwen-1.5B's 8 probes, ~420 GB at
  // 70B: docs/scale.md), for one write per round (~3 s a GB here).
  std::vector<std::string> order = {reference};  // the reference, the probes, the check's files
  for (size_t k = 0; k < probed.size(); ++k)
    order.push_back(fmt::format("{}/probe-{}-{}.gguf", dir, sha.substr(0, 12), probed[k]));
  order.insert(order.end(), check.begin(), check.end());
  // The reference, the probes and the check's files in round-robin rounds, each round starting at
  // another file (the files last in every round of a 28-file check on SmolLM2 read 11-25 % below
  // the model, the same files in a 6-file check within 4 %), the reference measured again after
  // every kPairOf files. A file's speed is its median over the rounds of its ratio to the
  // reference interpolated to its place between those two measurements, times the reference's
  // fastest: this machine's slow phases (the source at 148.6 tok/s in one round, 105-113 a quarter
  // of an hour later) fall on both sides of the ratio and cancel.
  const size_t others = order.size() - 1;
  std::vector<std::vector<double>> tg(order.size()), pp(order.size());  // per file: ratios to the reference
  std::vector<Speed> best(order.size());
  auto measure = [&](int r, size_t f) -> Result<Speed> {
    const bool probe = f >= 1 && f <= probed.size();
    if (probe) GAMMA_RETURN_IF_ERROR(write_probe(model, ws, probed_t[f - 1], order[f]));
    Result<Speed> measured_b = bench(llama_bench, order[f], threads_, reps);
    if (probe) std::remove(order[f].c_str());
    GAMMA_ASSIGN_OR_RETURN(Speed b, std::move(measured_b));
    std::fprintf(stderr, "round %d/%d %s: tg128 %.2f pp512 %.2f\n", r + 1, rounds, order[f].c_str(), b.decode_tps,
                 b.prefill_tps);
    if (f == 0) {
      best[0].decode_tps = std::max(best[0].decode_tps, b.decode_tps);
      best[0].prefill_tps = std::max(best[0].prefill_tps, b.prefill_tps);
    }
    return b;
  };
  for (int r = 0; r < rounds; ++r) {
    GAMMA_ASSIGN_OR_RETURN(Speed before, measure(r, 0));
    const size_t start = static_cast<size_t>(r) * others / static_cast<size_t>(rounds);
    for (size_t j = 0; j < others; j += kPairOf) {
      std::vector<std::pair<size_t, Speed>> got;
      for (size_t k = j; k < std::min(j + kPairOf, others); ++k) {
        const size_t f = 1 + (start + k) % others;
        GAMMA_ASSIGN_OR_RETURN(Speed b, measure(r, f));
        got.emplace_back(f, b);
      }
      GAMMA_ASSIGN_OR_RETURN(Speed after, measure(r, 0));
      for (size_t k = 0; k < got.size(); ++k) {
        const double w = static_cast<double>(k + 1) / static_cast<double>(got.size() + 1);
        const auto& [f, b] = got[k];
        tg[f].push_back(b.decode_tps / ((1 - w) * before.decode_tps + w * after.decode_tps));
        pp[f].push_back(b.prefill_tps / ((1 - w) * before.prefill_tps + w * after.prefill_tps));
      }
      before = after;
    }
  }
  for (size_t f = 1; f < order.size(); ++f) {
    best[f].decode_tps = median(tg[f]) * best[0].decode_tps;
    best[f].prefill_tps = median(pp[f]) * best[0].prefill_tps;
  }
  if (measured) measured->assign(best.begin() + 1 + probed.size(), best.end());
  // Unknowns: the rest and one factor per type (the reference's types and the probed ones); one
  // equation per measured file: its time = the rest + the head + each module's chain price x its
  // type's factor. One file fewer than unknowns: the rest's level is free, and a plan's time
  // barely moves along that line (exactly not for the measured files), so it is pinned where the
  // factors together are nearest 1 (least squares in the rest), within the rest >= 0 and every
  // factor >= kMinFactor. Pinning one type's factor at 1 instead (until 6e94f9d: the reference's
  // largest) forced its mispricing onto the others: SmolLM2's Q4_1 source, read from mapped pages
  // unrepacked in llama.cpp, costs twice its chain price, and the K-type probes then had no
  // positive factor (results/speed_model/probes_smollm2/check4, check5).
  std::vector<std::string> types_of = {dominant};
  types_of.insert(types_of.end(), probed.begin(), probed.end());
  const size_t n = types_of.size();  // = the files measured
  std::vector<KernelTime> factor(n);
  KernelTime rest;
  std::string warning;  // which file the factors do not fit, when one is not fitted exactly
  for (bool decode : {true, false}) {
    auto val = [&](const KernelTime& k) { return decode ? k.decode_us : k.prefill_us; };
    std::vector<std::vector<double>> a(n, std::vector<double>(n, 0.0));
    std::vector<double> b(n, 0.0), time(n);
    for (size_t f = 0; f < n; ++f) {
      time[f] = decode ? best[f].decode_us() : best[f].prefill_us();
      b[f] = time[f] - val(head);
      for (size_t i = 0; i < ws.size(); ++i) {
        if (ws[i].head) continue;
        std::string t = ws[i].type;
        KernelTime p = own[i];
        if (f > 0 && at[f - 1][i]) t = probed[f - 1], p = *at[f - 1][i];
        a[f][std::find(types_of.begin(), types_of.end(), t) - types_of.begin()] += val(p);
      }
    }
    // factors(rest) = f0 - rest g, with a f0 = b and a g = 1.
    GAMMA_ASSIGN_OR_RETURN(std::vector<double> f0, solve_dense(a, b));
    GAMMA_ASSIGN_OR_RETURN(std::vector<double> g, solve_dense(a, std::vector<double>(n, 1.0)));
    double num = 0, den = 0, lo = 0, hi = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < n; ++k) {
      num += g[k] * (f0[k] - 1), den += g[k] * g[k];
      if (g[k] == 0) {
        if (f0[k] < kMinFactor) hi = -1;
        continue;
      }
      const double edge = (f0[k] - kMinFactor) / g[k];  // f0 - rest g >= kMinFactor
      if (g[k] > 0) hi = std::min(hi, edge);
      if (g[k] < 0) lo = std::max(lo, edge);
    }
    std::vector<double> x(1 + n);  // the rest, then the factors
    if (lo <= hi && den > 0) {
      x[0] = std::clamp(num / den, lo, hi);
      for (size_t k = 0; k < n; ++k) x[1 + k] = f0[k] - x[0] * g[k];
    } else {
      // No line point within the bounds: a difference between two files larger than the whole
      // chain price of the modules it changed can only be fitted by a factor below the bound or
      // a negative rest (SmolLM2's Q3_K probe, only ffn_down changed from the source's Q4_1,
      // 1.32x the source in a paired check: probes_smollm2/check7). Measured noise, or a
      // cost the chains do not see; either way the nearest fit within the bounds (each file's
      // time relative to its measurement, the factors pulled to 1 by 1e-4), said in a warning,
      // and not every factor thrown away (before this session: all set to 1, check4, check7).
      GAMMA_ASSIGN_OR_RETURN(x, fit_within_bounds(a, b, time));
      size_t worst = 0;
      double worst_err = 0;
      for (size_t f = 0; f < n; ++f) {
        double pred = x[0] + val(head);
        for (size_t k = 0; k < n; ++k) pred += a[f][k] * x[1 + k];
        const double err = std::fabs(pred / time[f] - 1);
        if (err > worst_err) worst = f, worst_err = err;
      }
      if (warning.empty())
        warning = fmt::format("{} {:.1f} tok/s against the reference's {:.1f} in {}, fitted {:.1f} % off",
                              worst == 0 ? std::string("the reference") : types_of[worst] + "'s probe",
                              decode ? best[worst].decode_tps : best[worst].prefill_tps,
                              decode ? best[0].decode_tps : best[0].prefill_tps, decode ? "tg128" : "pp512",
                              100 * worst_err);
    }
    (decode ? rest.decode_us : rest.prefill_us) = x[0];
    for (size_t k = 0; k < n; ++k) (decode ? factor[k].decode_us : factor[k].prefill_us) = x[1 + k];
  }
  if (!warning.empty())
    std::fprintf(stderr, "gamma: warning: no factors fit every probe exactly (%s): the nearest fit is kept\n",
                 warning.c_str());
  Rest r;
  r.decode_us = rest.decode_us;
  r.prefill_us = rest.prefill_us;
  r.reference = std::filesystem::absolute(reference).string();
  r.reference_bench = best[0];
  rests_[sha] = r;
  // Every type asked for gets an entry, so the next run finds them all: 1 for types that hold none
  // of the modules.
  for (const auto& t : wanted) probes_[sha + " " + t] = KernelTime{1, 1};
  for (size_t k = 0; k < n; ++k) probes_[sha + " " + types_of[k]] = factor[k];
  return save();
}

void CostModel::use_cached_factors(const std::string& reference) {
  factor_.clear();
  auto sha = sha256_file_cached(reference);
  if (!sha.is_ok()) return;
  const std::string prefix = *sha + " ";
  for (auto it = probes_.lower_bound(prefix); it != probes_.end() && it->first.rfind(prefix, 0) == 0; ++it)
    factor_[it->first.substr(prefix.size())] = it->second;
}

Status CostModel::calibrate(const std::string& llama_bench, const std::string& reference, int reps,
                            const std::vector<std::string>& types, int rounds,
                            const std::vector<std::string>& check, std::vector<Speed>* measured) {
  if (reps < 1 || rounds < 1) return Status::error("speed: llama-bench repetitions and rounds must be positive");
  GAMMA_ASSIGN_OR_RETURN(std::string sha, sha256_file_cached(reference));
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(reference));
  std::set<std::string> wanted(types.begin(), types.end());
  for (const auto& l : model->linear()) wanted.insert(type_name(model->tensors().at(l.tensor).type));
  bool cached = rests_.count(sha) > 0;
  for (const auto& t : wanted) cached = cached && probes_.count(sha + " " + t);
  // Measured again, every type probed before on this reference is probed with the new ones: one
  // calibration (one rest, factors from the same rounds) per reference in the cache, so a table
  // made now and a file priced later by a type measured earlier agree.
  const std::string prefix = sha + " ";
  for (auto it = probes_.lower_bound(prefix); it != probes_.end() && it->first.rfind(prefix, 0) == 0; ++it)
    wanted.insert(it->first.substr(prefix.size()));
  if (!cached || !check.empty())
    GAMMA_RETURN_IF_ERROR(measure_probes(llama_bench, *model, sha, reps,
                                         std::vector<std::string>(wanted.begin(), wanted.end()), rounds, check,
                                         measured));
  rest_ = rests_.at(sha);
  use_cached_factors(reference);
  return Status::ok();
}

Result<Speed> CostModel::predict(const std::vector<Weight>& ws) {
  if (!calibrated()) return Status::error("speed: the model's rest is not measured (calibrate on a reference file)");
  GAMMA_ASSIGN_OR_RETURN(KernelTime w, weights_time(ws));
  const double d = w.decode_us + rest_.decode_us, p = w.prefill_us + rest_.prefill_us;
  if (!(d > 0 && p > 0)) return Status::error("speed: the predicted time is not positive (the rest is mis-measured)");
  Speed s;
  s.decode_tps = 1e6 / d;
  s.prefill_tps = 1e6 * kPrefillBatch / p;
  return s;
}

// ---- gamma.speed ----

json CostTable::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["model_fingerprint"] = model_fingerprint;
  j["machine"] = machine;
  j["threads"] = threads;
  j["rest"] = rest_json(rest);
  json c = json::object();
  for (const auto& [mod, cands] : cost) {
    json m = json::object();
    for (const auto& [id, t] : cands) m[id] = time_json(t);
    c[mod] = m;
  }
  j["cost"] = c;
  return j;
}

Result<CostTable> CostTable::from_json(const json& j) {
  try {
    CostTable t;
    t.model_fingerprint = j.at("model_fingerprint").get<std::string>();
    t.machine = j.at("machine").get<std::string>();
    t.threads = int_at<int>(j, "threads");
    t.rest = rest_from(j.at("rest"));
    for (const auto& [mod, cands] : j.at("cost").items())
      for (const auto& [id, v] : cands.items()) t.cost[mod][id] = time_from(v);
    return t;
  } catch (const std::exception& e) {
    return Status::errorf(Status::Code::kCorrupt, "not a gamma.speed file: {}", e.what());
  }
}

Result<CostTable> CostTable::load(const std::string& path) { return load_typed<CostTable>(path); }
Status CostTable::save(const std::string& path) const { return write_json(path, to_json()); }

Status CostTable::covers(const Manifest& m) const {
  if (model_fingerprint != m.model_fingerprint)
    return Status::error("the speed table is of another model than the pool (fingerprints differ)");
  for (const auto& e : m.modules) {
    auto it = cost.find(e.name);
    for (const auto& c : e.candidates)
      if (it == cost.end() || !it->second.count(c.id))
        return Status::errorf("the speed table does not price {} of {} (made for another pool? run gamma speed --pool again)",
                              c.id, e.name);
  }
  return Status::ok();
}

Result<KernelTime> CostTable::at(const std::string& tensor, const std::string& id) const {
  auto it = cost.find(tensor);
  if (it == cost.end() || !it->second.count(id))
    return Status::errorf("the speed table does not price {} at {} (run gamma speed --pool again)", tensor, id);
  return it->second.at(id);
}

Result<Speed> CostTable::predict(const Manifest& m, const Plan& p) const {
  GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(m, p));
  for (auto& w : ws)
    if (!w.head) w.type = p.modules.at(w.name);  // the table prices a module by its candidate's id
  return predict(ws);
}

Result<Speed> CostTable::predict(const Model& file) const {
  GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(file));
  return predict(ws);
}

Result<Speed> CostTable::predict(const std::vector<Weight>& ws) const {
  double d = rest.decode_us, pre = rest.prefill_us;
  for (const auto& w : ws) {
    GAMMA_ASSIGN_OR_RETURN(KernelTime k, at(w.name, w.type));
    d += k.decode_us;
    pre += k.prefill_us;
  }
  if (!(d > 0 && pre > 0)) return Status::error("speed: the predicted time is not positive (the rest is mis-measured)");
  Speed s;
  s.decode_tps = 1e6 / d;
  s.prefill_tps = 1e6 * kPrefillBatch / pre;
  return s;
}

Status CostTable::rest_on(const std::string& reference, const Speed& measured) {
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(reference));
  GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(*model));
  KernelTime w;
  for (const auto& x : ws) {
    GAMMA_ASSIGN_OR_RETURN(KernelTime k, at(x.name, x.type));
    w.decode_us += k.decode_us;
    w.prefill_us += k.prefill_us;
  }
  rest.decode_us = measured.decode_us() - w.decode_us;
  rest.prefill_us = measured.prefill_us() - w.prefill_us;
  rest.reference = std::filesystem::absolute(reference).string();
  rest.reference_bench = measured;
  return Status::ok();
}

namespace {
// The number in `arg`, when it is one.
std::optional<double> tokens_per_second(const std::string& arg) {
  char* end = nullptr;
  const double v = std::strtod(arg.c_str(), &end);
  if (arg.empty() || !end || *end != '\0') return std::nullopt;
  return v;
}
}  // namespace

bool names_file(const std::string& arg) { return !tokens_per_second(arg) && file_exists(arg); }

Status check_speed_target(const std::string& arg) {
  if (auto v = tokens_per_second(arg))
    return *v >= 0 && std::isfinite(*v) ? Status::ok() : Status::errorf("{}: tokens/s must be a non-negative number", arg);
  return file_exists(arg) ? Status::ok() : Status::errorf("{}: neither tokens/s nor a GGUF file", arg);
}

namespace {
// A file's weights, when it is the pool's model: every linear module by name and shape.
Result<std::vector<Weight>> pool_model_weights(const std::string& path, const Manifest& m) {
  GAMMA_ASSIGN_OR_RETURN(auto model, Model::open(path));
  GAMMA_ASSIGN_OR_RETURN(auto ws, weights_of(*model));
  for (const auto& w : ws) {
    if (w.head) continue;
    const auto* e = m.find(w.name);
    if (!e || e->shape.size() != 2 || e->shape[0] != w.n_in || e->shape[1] != w.n_out)
      return Status::errorf("{} is not the pool's model ({} {})", path, w.name, e ? "has another shape" : "is not a module");
  }
  return ws;
}
}  // namespace

Result<double> speed_target(const std::string& arg, const Manifest& m, const CostTable& t, bool decode) {
  GAMMA_RETURN_IF_ERROR(check_speed_target(arg));
  if (auto v = tokens_per_second(arg)) return *v;
  GAMMA_ASSIGN_OR_RETURN(auto ws, pool_model_weights(arg, m));
  GAMMA_ASSIGN_OR_RETURN(Speed s, t.predict(ws));
  return decode ? s.decode_tps : s.prefill_tps;
}

namespace {
// Prices are added only to a table of this model measured here: another machine's or another
// thread count's times beside these would make a plan's sum of neither.
Status check_extends(const CostTable& t, const Manifest& m, const CostModel& cm) {
  if (t.model_fingerprint != m.model_fingerprint)
    return Status::error("the speed table is of another model than the pool (fingerprints differ)");
  if (t.machine != kernel_signature() || t.threads != cm.threads())
    return Status::errorf("the speed table was measured on another machine or at {} threads ({}), not here at {}; "
                          "run gamma speed --pool again", t.threads, t.machine, cm.threads());
  return Status::ok();
}
}  // namespace

Result<int> price_file(CostTable& t, const Manifest& m, const std::string& file, CostModel& cm) {
  GAMMA_RETURN_IF_ERROR(check_extends(t, m, cm));
  GAMMA_ASSIGN_OR_RETURN(auto ws, pool_model_weights(file, m));
  const Layer layer = layer_of(m);
  int added = 0;
  for (const auto& w : ws) {
    if (t.cost.count(w.name) && t.cost.at(w.name).count(w.type)) continue;
    // As cost_table prices the pool's own: a module in its type's context, the head alone.
    GAMMA_ASSIGN_OR_RETURN(KernelTime k, w.head ? cm.kernel(w.type, w.n_in, w.n_out, true)
                                                : cm.module(w.type, w.n_in, w.n_out, layer));
    t.cost[w.name][w.type] = k;
    ++added;
  }
  return added;
}

Result<int> price_speed_targets(CostTable& t, const Manifest& m, const std::string& min_decode,
                                const std::string& min_prefill, std::optional<CostModel>& cm) {
  int added = 0;
  for (const std::string* f : {&min_decode, &min_prefill}) {
    if (!names_file(*f)) continue;
    if (!cm) {
      GAMMA_ASSIGN_OR_RETURN(cm, CostModel::open(t.threads));
      cm->use_cached_factors(t.rest.reference);
    }
    auto n = price_file(t, m, *f, *cm);
    if (!n.is_ok()) return n.status().with_context(f == &min_decode ? "--min-decode" : "--min-prefill");
    added += *n;
  }
  return added;
}

Result<int> price_candidates(CostTable& t, const Manifest& m, CostModel& cm) {
  GAMMA_RETURN_IF_ERROR(check_extends(t, m, cm));
  const Layer layer = layer_of(m);
  int added = 0;
  for (const auto& e : m.modules) {
    GAMMA_RETURN_IF_ERROR(priced(e.name, e.shape));
    for (const auto& c : e.candidates) {
      if (t.cost.count(e.name) && t.cost.at(e.name).count(c.id)) continue;
      GAMMA_ASSIGN_OR_RETURN(KernelTime k, cm.module(c.type, e.shape[0], e.shape[1], layer));
      t.cost[e.name][c.id] = k;
      ++added;
    }
  }
  // The head at every type a plan can give it by default and every cheaper head type below
  // those (gamma run's head rules), and at every type of the pool.
  GAMMA_ASSIGN_OR_RETURN(Weight head, head_of(m));
  std::set<std::string> head_types(m.types.begin(), m.types.end());
  head_types.insert(head.type);
  for (double bpw = 1.0; bpw <= 16.0; bpw += 0.25)
    for (std::string t = default_fixed_types(m, bpw).at(head.name); !t.empty(); t = cheaper_head_type(m, head.name, t))
      head_types.insert(t);
  for (const auto& type : head_types) {
    if (!check_fixed_type(m, head.name, type).is_ok()) continue;
    if (t.cost.count(head.name) && t.cost.at(head.name).count(type)) continue;
    GAMMA_ASSIGN_OR_RETURN(KernelTime k, cm.kernel(type, head.n_in, head.n_out, true));
    t.cost[head.name][type] = k;
    ++added;
  }
  return added;
}

Result<SpeedTargets> speed_targets(const std::string& min_decode, const std::string& min_prefill, const Manifest& m,
                                   const CostTable& t) {
  SpeedTargets out;
  for (auto [arg, decode, dst] : {std::make_tuple(&min_decode, true, &out.decode_tps),
                                  std::make_tuple(&min_prefill, false, &out.prefill_tps)}) {
    if (arg->empty()) continue;
    auto v = speed_target(*arg, m, t, decode);
    if (!v.is_ok()) return v.status().with_context(decode ? "--min-decode" : "--min-prefill");
    *dst = *v;
  }
  return out;
}

Result<CostTable> cost_table(const Manifest& m, CostModel& cm, const std::string& llama_bench,
                             const std::string& reference) {
  CostTable t;
  t.model_fingerprint = m.model_fingerprint;
  t.machine = kernel_signature();
  t.threads = cm.threads();
  const std::string ref = reference.empty() ? m.model_path : reference;
  GAMMA_RETURN_IF_ERROR(pool_model_weights(ref, m).status());
  // The probes first: the candidates are priced with their types' factors.
  GAMMA_RETURN_IF_ERROR(cm.calibrate(llama_bench, ref, 2, m.types));
  GAMMA_RETURN_IF_ERROR(price_candidates(t, m, cm).status());
  t.rest = cm.rest();
  return t;
}

}  // namespace gm::speed
