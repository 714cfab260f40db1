#include "hawq/hawq.h"

#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "gguf_model/model.h"
#include "learn/candidates.h"
#include "learn/dist.h"
#include "decoder/layer.h"
#include "pool/manifest.h"
#include "scores/scores.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/threads.h"

namespace gm {
namespace {

// The finished layers of an earlier run with the same key (pool, teacher, settings,
// activations), from its checkpoint: their modules, the first layer still to do, and the
// seconds spent.
struct Resumed {
  json modules = json::object();
  int first = 0;
  double seconds = 0;
};
Resumed resume(const std::string& ckpt_path, const json& key, int lo, int hi) {
  Resumed p;
  p.first = lo;
  auto text = read_file(ckpt_path);
  if (!text.is_ok()) return p;
  json ck = json::parse(*text, nullptr, false);
  bool same = ck.is_object() && ck.contains("modules") && ck["modules"].is_object() && ck.contains("layers_done") &&
              ck["layers_done"].is_number_integer() && ck.contains("seconds") && ck["seconds"].is_number();
  for (const auto& [k, v] : key.items()) same = same && ck.contains(k) && ck[k] == v;
  if (same && ck["layers_done"].get<int>() >= lo && ck["layers_done"].get<int>() <= hi) {
    p.modules = ck["modules"];
    p.first = ck["layers_done"].get<int>();
    p.seconds = ck["seconds"].get<double>();
  }
  return p;
}

// The relative standard error of the mean of `xs` (infinite below two values or at mean 0).
double rel_stderr(const std::vector<double>& xs) {
  const double n = double(xs.size());
  if (xs.size() < 2) return INFINITY;
  double mean = 0, ss = 0;
  for (double x : xs) mean += x / n;
  for (double x : xs) ss += (x - mean) * (x - mean);
  const double se = std::sqrt(ss / (n - 1) / n);
  return mean == 0 ? INFINITY : se / std::fabs(mean);
}

// Each module's Hutchinson probes v^T H v; the trace is their mean.
struct Probes {
  std::vector<std::vector<double>> of;  // [module][probe]
  double trace(size_t i) const {
    double t = 0;
    for (double x : of[i]) t += x;
    return t / double(of[i].size());
  }
};

// Tr(H) of each weight in `wv` (the layer's modules in `w`, requiring grad) by Hutchinson on the
// teacher-forced layer MSE (x in, y the teacher's output, B sequences of T tokens): H v is the
// gradient of <grad L, v>, so the first gradient keeps its graph and every probe reuses it.
// With opt.converge, the probes stop once every module's trace is known to that relative error.
Probes hutchinson_traces(const HParams& hp, const LayerParams& lp, const std::array<at::Tensor, kNumLinear>& w,
                         const std::vector<at::Tensor>& wv, const Positional& pos, std::vector<float>& x,
                         std::vector<float>& y, int B, int T, const HawqOptions& opt) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  auto xt = at::from_blob(x.data(), {B, T, hp.n_embd}, f32);
  auto yt = at::from_blob(y.data(), {B, T, hp.n_embd}, f32);
  auto loss = (layer_forward(hp, lp, w, pos, xt) - yt).pow(2).mean();
  auto g = torch::autograd::grad({loss}, wv, {}, /*retain_graph=*/true, /*create_graph=*/true);
  Probes p;
  p.of.resize(wv.size());
  for (int s = 0; s < opt.samples; ++s) {
    std::vector<at::Tensor> v;
    at::Tensor gv = at::zeros({}, f32);
    for (size_t i = 0; i < wv.size(); ++i) {
      v.push_back(at::randint(0, 2, wv[i].sizes(), f32).mul_(2).sub_(1));
      gv = gv + (g[i] * v[i]).sum();
    }
    auto hv = torch::autograd::grad({gv}, wv, {}, /*retain_graph=*/s + 1 < opt.samples, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    for (size_t i = 0; i < wv.size(); ++i) p.of[i].push_back(hv[i].defined() ? (hv[i] * v[i]).sum().item<double>() : 0.0);
    if (opt.converge > 0 && s + 1 >= HawqOptions::kMinProbes &&
        std::all_of(p.of.begin(), p.of.end(), [&](const std::vector<double>& xs) { return rel_stderr(xs) <= opt.converge; }))
      break;
  }
  return p;
}

// Layer l's modules scored: Tr(H) of each by Hutchinson on the teacher-forced layer MSE (x in,
// y the teacher's output, B sequences of T tokens), then every candidate's Omega.
// `store` is null for an estimate manifest (its sq_err is the perturbation); `traces`, when
// not null, holds every module's Hessian trace (--traces-from) and x, y are not read.
Status score_layer(TorchDecoder& model, const Manifest& man, const CandidateStore* store, const json* traces,
                   const HawqOptions& opt, int l, const Positional& pos, std::vector<float>& x, std::vector<float>& y,
                   int B, int T, json* modules_out) {
  json& modules = *modules_out;
  const HParams& hp = model.hparams();
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  std::vector<float> cand;
  GAMMA_ASSIGN_OR_RETURN(auto lp, model.layer_params(l));
  GAMMA_ASSIGN_OR_RETURN(auto w, model.layer_weights(l));
  std::vector<const ModuleEntry*> in_pool(kNumLinear, nullptr);
  std::vector<at::Tensor> wv;
  std::vector<int> kinds;
  for (const auto& e : man.modules)
    if (e.layer == l) {
      const int k = linear_kind_index(e.kind);
      if (k < 0) return Status::errorf("pool module {} has unknown kind {}", e.name, e.kind);
      in_pool[size_t(k)] = &e;
      w[size_t(k)] = w[size_t(k)].detach().requires_grad_(true);
      wv.push_back(w[size_t(k)]);
      kinds.push_back(k);
    }
  if (wv.empty()) return Status::ok();
  std::vector<double> trace(wv.size(), 0.0);
  Probes probes;
  if (traces) {
    for (size_t i = 0; i < wv.size(); ++i) trace[i] = (*traces)[in_pool[size_t(kinds[i])]->name].get<double>();
  } else {
    probes = hutchinson_traces(hp, lp, w, wv, pos, x, y, B, T, opt);
    for (size_t i = 0; i < wv.size(); ++i) trace[i] = probes.trace(i);
  }
  // Omega per candidate: the trace per weight times the squared perturbation.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < wv.size(); ++i) {
    const ModuleEntry& e = *in_pool[size_t(kinds[i])];
    const at::Tensor W = wv[i].detach().contiguous();
    const double tr_per_weight = trace[i] / double(e.n_params);
    json score = json::object(), pert = json::object();
    for (const auto& c : e.candidates) {
      double d2 = c.sq_err;
      if (store) {
        cand.resize(size_t(e.n_params));
        GAMMA_RETURN_IF_ERROR(store->dequantize(e, c, cand.data(), opt.n_threads));
        d2 = (at::from_blob(cand.data(), W.sizes(), f32) - W).pow(2).sum().item<double>();
      } else if (d2 < 0) {
        return Status::errorf("{}: estimate candidate {} has no sq_err (an estimate of an older gamma?)", e.name, c.id);
      }
      pert[c.id] = d2;
      score[c.id] = -tr_per_weight * d2;
    }
    modules[e.name] = {{"score", score}, {"hessian_trace", trace[i]}, {"trace_per_weight", tr_per_weight},
                       {"perturbation", pert}};
    if (!probes.of.empty()) {  // measured here (not --traces-from): the probes and their error
      modules[e.name]["trace_probes"] = probes.of[i];
      const double err = rel_stderr(probes.of[i]);
      modules[e.name]["trace_rel_stderr"] = std::isfinite(err) ? json(err) : json(nullptr);
    }
  }
  return Status::ok();
}

// --traces-from: every module's Hessian trace from a HAWQ-V2 scores file of the same teacher
// and settings (a trace depends on those, not on the candidates), as {module: trace}.
Result<json> reused_traces(const std::string& path, const Manifest& man, const std::string& teacher_fingerprint,
                           const HawqOptions& opt, const std::string& activations_key) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, scores::Scores::kSchema, scores::Scores::kVersion));
  const json want = {{"samples", opt.samples}, {"batch", opt.seqs}, {"seed", opt.seed}, {"converge", opt.converge}};
  try {
    if (j.value("method", "") != "hawq") return Status::errorf("--traces-from {}: not HAWQ-V2 scores", path);
    if (j.value("teacher_fingerprint", "") != teacher_fingerprint)
      return Status::errorf("--traces-from {}: traces of another teacher", path);
    const json& h = j.at("hyperparameters");
    for (const auto& [k, v] : want.items()) {
      const json had = h.value(k, json(0.0));  // files before --converge: 0
      if (had != v) return Status::errorf("--traces-from {}: measured with {} {}, not {}", path, k, had.dump(), v.dump());
    }
    if (h.at("activations").at("key") != activations_key)
      return Status::errorf("--traces-from {}: measured on other calibration activations", path);
    json out = json::object();
    for (const auto& e : man.modules) {
      if (!j.at("modules").contains(e.name)) return Status::errorf("--traces-from {}: no trace of {}", path, e.name);
      out[e.name] = j["modules"][e.name].at("hessian_trace").get<double>();
    }
    return out;
  } catch (const std::exception& e) {
    return Status::errorf("--traces-from {}: malformed HAWQ-V2 scores: {}", path, e.what());
  }
}

// What the checkpoint key records of reused traces (a change of them restarts the run).
std::string traces_sha(const json& traces) {
  const std::string d = traces.dump();
  return sha256_hex(d.data(), d.size());
}

// Rank 0 gathers every rank's layers (one broadcast per rank; the scores are small).
Status gather(Comm& comm, const HawqOptions& opt, json& modules) {
  for (int r = 1; r < opt.world_size; ++r) {
    std::string part = opt.rank == r ? modules.dump() : std::string();
    GAMMA_RETURN_IF_ERROR(comm.broadcast(part, r));
    if (opt.rank == 0) {
      json pj = json::parse(part, nullptr, false);
      if (!pj.is_object()) return Status::errorf("rank {} sent unreadable scores", r);
      for (auto& [name, m] : pj.items()) modules[name] = m;
    }
  }
  return Status::ok();
}

// SCORES.json: Stage II's input; the traces and perturbations ride along per module.
json scores_file(const Manifest& man, const std::string& pool_sha, const std::string& teacher_fingerprint,
                 const HawqOptions& opt, const std::string& activations_key, const json& modules) {
  scores::Scores sc;
  sc.method = "hawq";
  sc.model_fingerprint = man.model_fingerprint;
  sc.pool_manifest_sha256 = pool_sha;
  for (const auto& [name, m] : modules.items())
    for (const auto& [id, v] : m["score"].items()) sc.score[name][id] = v.get<double>();
  json out = sc.to_json();
  for (const auto& [name, m] : modules.items())
    for (const char* k : {"hessian_trace", "trace_per_weight", "perturbation", "trace_probes", "trace_rel_stderr"})
      if (m.contains(k)) out["modules"][name][k] = m[k];
  out["teacher_fingerprint"] = teacher_fingerprint;
  if (!opt.traces_from.empty()) out["traces_from"] = opt.traces_from;
  out["hyperparameters"] = {{"samples", opt.samples}, {"batch", opt.seqs}, {"seed", opt.seed}, {"converge", opt.converge},
                            {"calib_tokens", opt.calib.calib_tokens}, {"seq_len", opt.calib.seq_len},
                            {"calib_files", opt.calib.text_files}, {"activations", {{"key", activations_key}}},
                            {"score", "-Tr(H)/n * ||W_b - W||^2 (HAWQ-V2), H of the teacher-forced layer MSE"}};
  return out;
}

}  // namespace

Result<json> hawq_scores(const HawqOptions& opt_in) {
  HawqOptions opt = opt_in;
  if (opt.samples < 1 || opt.seqs < 1) return Status::error("--samples and --seqs must be positive");
  if (!(opt.converge >= 0 && opt.converge < 1)) return Status::error("--converge must be in [0, 1)");
  opt.n_threads = resolve_threads(opt.n_threads);
  if (opt.calib.text_files.empty()) {
    GAMMA_ASSIGN_OR_RETURN(opt.calib.text_files, default_calibration_files());
  }
  opt.calib.n_threads = opt.n_threads;
  opt.calib.quiet = opt.quiet;
  GAMMA_RETURN_IF_ERROR(check_writable_dir(opt.out_path));
  if (opt.world_size > 1 && opt.rendezvous.empty())
    return Status::error("--world-size > 1 needs --rendezvous tcp://HOST:PORT or file://PATH");
  const auto t0 = std::chrono::steady_clock::now();

  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(opt.pool_dir));
  GAMMA_ASSIGN_OR_RETURN(std::string pool_sha, sha256_file(opt.pool_dir + "/manifest.json"));
  GAMMA_ASSIGN_OR_RETURN(auto model, TorchDecoder::open(opt.teacher_path));
  const Model& teacher = model->model();
  if (teacher.arch() != man.arch || teacher.n_layer() != man.n_layer)
    return Status::errorf("teacher {} is {} with {} layers but the pool is of {} with {} layers", opt.teacher_path,
                          teacher.arch(), teacher.n_layer(), man.arch, man.n_layer);
  for (const auto& e : man.modules)
    if (teacher.find(e.name) < 0) return Status::errorf("teacher {} has no tensor {} (a teacher of another model?)", opt.teacher_path, e.name);
  std::unique_ptr<CandidateStore> store;
  if (man.estimate_rows == 0) {
    GAMMA_ASSIGN_OR_RETURN(store, CandidateStore::open(man));
  }
  if (opt.world_size > man.n_layer) return Status::errorf("--world-size {} exceeds the {} layers", opt.world_size, man.n_layer);
  GAMMA_ASSIGN_OR_RETURN(auto comm, Comm::connect(opt.rendezvous, opt.rank, opt.world_size, opt.dist_timeout));
  const int lo = int(int64_t(opt.rank) * man.n_layer / opt.world_size);
  const int hi = int(int64_t(opt.rank + 1) * man.n_layer / opt.world_size);
  GAMMA_ASSIGN_OR_RETURN(auto cache, open_cache_part(*comm, opt.teacher_path, opt.calib, lo, hi));
  if (opt.seqs > cache->n_seq())
    return Status::errorf("--seqs {} exceeds the {} calibration sequences (raise --calib-tokens)", opt.seqs, cache->n_seq());
  set_compute_threads(opt.n_threads);
  const HParams& hp = model->hparams();
  const int L = man.n_layer, T = cache->seq_len(), B = opt.seqs;
  const Positional pos = make_positional(hp, T, model->rope_freqs());
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) seqs.push_back(b);
  std::vector<float> x(size_t(B) * size_t(T) * size_t(hp.n_embd)), y(x.size());

  // Resumable per layer: OUT.ckpt holds the finished layers' modules under a key of what
  // determines them; each layer draws its probes from its own seed, so a resumed run writes
  // the same scores as an uninterrupted one (at the same thread count).
  const std::string ckpt_path =
      opt.out_path + (opt.world_size > 1 ? ".rank" + std::to_string(opt.rank) : std::string()) + ".ckpt";
  json key = {{"schema", "gamma.hawq.checkpoint"}, {"version", 1}, {"pool_manifest_sha256", pool_sha},
              {"teacher_fingerprint", teacher.fingerprint()}, {"samples", opt.samples}, {"seqs", opt.seqs},
              {"seed", opt.seed}, {"converge", opt.converge}, {"activations", cache->key()}};
  // --traces-from: the traces of the same teacher and settings; only the perturbations are new.
  json traces;
  if (!opt.traces_from.empty()) {
    GAMMA_ASSIGN_OR_RETURN(traces, reused_traces(opt.traces_from, man, teacher.fingerprint(), opt, cache->key()));
    key["traces_from"] = traces_sha(traces);
  }
  // Every rank must run rank 0's job; each checkpoints its own layers.
  std::string job = opt.rank == 0 ? key.dump() : std::string();
  GAMMA_RETURN_IF_ERROR(comm->broadcast(job));
  if (job != key.dump()) return Status::errorf("rank {} was started with other settings, pool or teacher than rank 0", opt.rank);
  if (opt.world_size > 1) key["layers"] = {lo, hi};
  Resumed done = resume(ckpt_path, key, lo, hi);
  json& modules = done.modules;
  const int first = done.first;
  const double seconds_before = done.seconds;
  if (first > lo && !opt.quiet) std::fprintf(stderr, "hawq: resuming at layer %d of %d from %s\n", first, L, ckpt_path.c_str());
  auto elapsed = [&] { return seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  std::unique_ptr<Progress> bar;
  if (!opt.quiet) bar = std::make_unique<Progress>("hawq", hi - lo);
  for (int l = first; l < hi; ++l) {
    at::manual_seed(opt.seed * 1000003ULL + uint64_t(l));
    if (traces.is_null()) {
      GAMMA_RETURN_IF_ERROR(cache->read(l, seqs, x.data()));
      GAMMA_RETURN_IF_ERROR(cache->read(l + 1, seqs, y.data()));
    }
    GAMMA_RETURN_IF_ERROR(score_layer(*model, man, store.get(), traces.is_null() ? nullptr : &traces, opt, l, pos, x, y,
                                      B, T, &modules));
    json ck = key;
    ck["layers_done"] = l + 1;
    ck["seconds"] = elapsed();
    ck["modules"] = modules;
    GAMMA_RETURN_IF_ERROR(write_file_atomic_nosync(ckpt_path, ck.dump() + "\n"));
    if (opt.on_layer_done) opt.on_layer_done(l);
    if (bar) bar->update(l + 1 - lo);
  }
  if (bar) bar->finish();
  GAMMA_RETURN_IF_ERROR(gather(*comm, opt, modules));
  if (opt.rank != 0) {
    std::remove(ckpt_path.c_str());
    return json::object();
  }

  json out = scores_file(man, pool_sha, teacher.fingerprint(), opt, cache->key(), modules);
  out["stats"] = {{"seconds", elapsed()}, {"threads", opt.n_threads}, {"resumed_at_layer", first},
                  {"world_size", opt.world_size}};
  GAMMA_RETURN_IF_ERROR(write_json(opt.out_path, out));
  std::remove(ckpt_path.c_str());
  return out;
}

}  // namespace gm
