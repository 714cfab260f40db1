#include "learn/learn.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "gguf_model/model.h"
#include "learn/candidates.h"
#include "learn/layer_step.h"
#include "model/hparams.h"
#include "pool/manifest.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {
namespace {

constexpr const char* kCkptSchema = "gamma.learn.checkpoint";

// Counter-based randomness: every draw is a function of (seed, step, stream), so a resumed
// run draws exactly what an uninterrupted one would.
uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
struct Rng {
  uint64_t s;
  Rng(uint64_t seed, uint64_t step, uint64_t stream) : s(splitmix(splitmix(splitmix(seed) ^ step) ^ stream)) {}
  uint64_t next() { return splitmix(s++); }
  double uniform_open() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
  uint64_t below(uint64_t n) { return next() % n; }
};
enum Stream : uint64_t { kGumbel = 1, kBatch = 2, kLayers = 3 };

// The batch of a step: consecutive slices of a per-epoch permutation of the sequences.
std::vector<int> batch_of(uint64_t seed, int step, int B, int n_seq) {
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) {
    const int64_t idx = int64_t(step) * B + b, epoch = idx / n_seq;
    std::vector<int> perm(static_cast<size_t>(n_seq));
    for (int i = 0; i < n_seq; ++i) perm[size_t(i)] = i;
    Rng r(seed, uint64_t(epoch), kBatch);
    for (int i = n_seq - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(r.below(uint64_t(i) + 1))]);
    seqs.push_back(perm[size_t(idx % n_seq)]);
  }
  return seqs;
}

// The layers of a step: all, or k drawn without replacement (each with probability k/L), sorted.
std::vector<int> layers_of(uint64_t seed, int step, int L, int k) {
  std::vector<int> layers(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) layers[size_t(l)] = l;
  if (k < L) {
    Rng r(seed, uint64_t(step), kLayers);
    for (int i = 0; i < k; ++i) std::swap(layers[size_t(i)], layers[size_t(i) + size_t(r.below(uint64_t(L - i)))]);
    layers.resize(size_t(k));
    std::sort(layers.begin(), layers.end());
  }
  return layers;
}

struct Mod {
  const ModuleEntry* e = nullptr;
  int kind = -1;
  size_t K = 0;
  std::vector<double> bpw;
  // State (checkpointed): logits and Adam moments. With K == 2 only pi[1] moves (pi[0] = 0):
  // the sigmoid form, p1 = sigmoid((pi1 + g1 - g0) / tau).
  std::vector<double> pi, m, v;
};

struct State {
  int step = 0;  // steps done
  double lambda1 = 0, lambda2 = 0;
  double mse_ref = 0;  // the MSE of step 0 (all layers): the unit of the MSE term
  double mse_eval_init = 0;  // eval_mse at the initial logits
  json curve = json::array();
  double seconds = 0;  // optimisation time before this process (resumed runs)
};

double tau_at(const LearnOptions& o, int step) {
  if (o.tau_end <= 0 || o.steps <= 1) return o.tau;
  return o.tau * std::pow(o.tau_end / o.tau, double(step) / double(o.steps - 1));
}

void softmax(const std::vector<double>& z, std::vector<double>& p) {
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  p.resize(z.size());
  for (size_t i = 0; i < z.size(); ++i) sum += (p[i] = std::exp(z[i] - mx));
  for (double& x : p) x /= sum;
}

// dL/dpi given dL/dp for p = softmax((pi + g) / tau), accumulated into gpi.
void softmax_backward(const std::vector<double>& p, const std::vector<double>& gp, double tau,
                      std::vector<double>& gpi) {
  double dot = 0;
  for (size_t i = 0; i < p.size(); ++i) dot += p[i] * gp[i];
  for (size_t i = 0; i < p.size(); ++i) gpi[i] += p[i] * (gp[i] - dot) / tau;
}

double expected_bpw(const std::vector<Mod>& mods, const std::vector<std::vector<double>>& pbar, double n_total) {
  double b = 0;
  for (size_t i = 0; i < mods.size(); ++i)
    for (size_t j = 0; j < mods[i].K; ++j) b += double(mods[i].e->n_params) * pbar[i][j] * mods[i].bpw[j];
  return b / n_total;
}

json hyperparameters(const LearnOptions& o, const std::string& cache_key, int n_seq) {
  json h = json::object();
  h["steps"] = o.steps;
  h["batch"] = o.batch;
  h["layers_per_step"] = o.layers_per_step;
  h["optimizer"] = o.optimizer;
  h["lr"] = o.lr;
  h["lr_lambda"] = o.lr_lambda;
  h["tau"] = o.tau;
  h["tau_end"] = o.tau_end;
  h["seed"] = o.seed;
  h["budget_on"] = "softmax(pi/tau)";
  h["init"] = o.init;
  h["lambda2_init"] = o.lambda2_init;
  h["objective"] = o.objective;
  h["penalty"] = o.penalty;
  if (o.estimator != "soft") h["estimator"] = o.estimator;  // absent: soft (older checkpoints match)
  if (o.penalty == "dnas") h["dnas"] = {{"beta", o.dnas_beta}, {"gamma", o.dnas_gamma}};
  h["mse_unit"] = "step-0 MSE";
  h["calib_tokens"] = int64_t(n_seq) * o.calib.seq_len;
  h["seq_len"] = o.calib.seq_len;
  h["calib_files"] = o.calib.text_files;
  h["activations"] = {{"key", cache_key}, {"dtype", o.calib.f32 ? "f32" : "f16"}};
  return h;
}

Status validate(const LearnOptions& o) {
  if (o.pool_dir.empty()) return Status::error("no pool directory given");
  if (o.teacher_path.empty()) return Status::error("no teacher given (--teacher F32.gguf)");
  if (o.out_path.empty()) return Status::error("no output given (-o SCORES.json)");
  if (o.steps < 0) return Status::errorf("--steps must be >= 0 (got {}; 0 writes the starting scores)", o.steps);
  if (o.batch < 1) return Status::errorf("--batch must be at least 1 (got {})", o.batch);
  if (o.layers_per_step < 0) return Status::errorf("--layers-per-step must be >= 0 (got {})", o.layers_per_step);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return Status::errorf("--lr must be positive (got {})", o.lr);
  if (!(o.lr_lambda >= 0) || !std::isfinite(o.lr_lambda)) return Status::errorf("--lr-lambda must be >= 0 (got {})", o.lr_lambda);
  if (!(o.tau > 0) || !std::isfinite(o.tau)) return Status::errorf("--tau must be positive (got {})", o.tau);
  if (o.tau_end < 0 || !std::isfinite(o.tau_end)) return Status::errorf("--tau-end must be >= 0 (got {})", o.tau_end);
  if (!(o.lambda2_init >= 0) || !std::isfinite(o.lambda2_init)) return Status::errorf("--lambda2-init must be >= 0 (got {})", o.lambda2_init);
  if (o.objective != "mse" && o.objective != "ce") return Status::errorf("--objective must be mse or ce (got {})", o.objective);
  if (o.objective == "ce" && o.layers_per_step != 0) return Status::error("--objective ce chains all layers: --layers-per-step must be 0");
  if (o.estimator != "soft" && o.estimator != "st") return Status::errorf("--estimator must be soft or st (got {})", o.estimator);
  if (o.penalty != "al" && o.penalty != "dnas") return Status::errorf("--penalty must be al or dnas (got {})", o.penalty);
  if (!(o.dnas_beta >= 0) || !std::isfinite(o.dnas_beta) || !(o.dnas_gamma >= 0) || !std::isfinite(o.dnas_gamma))
    return Status::errorf("--dnas-beta and --dnas-gamma must be >= 0 (got {}, {})", o.dnas_beta, o.dnas_gamma);
  if (o.init != "tilt" && o.init != "uniform") return Status::errorf("--init must be tilt or uniform (got {})", o.init);
  if (o.optimizer != "adam" && o.optimizer != "sgd") return Status::errorf("--optimizer must be adam or sgd (got {})", o.optimizer);
  if (o.checkpoint_every < 1) return Status::errorf("--checkpoint-every must be at least 1 (got {})", o.checkpoint_every);
  for (const auto& f : o.calib.text_files)
    if (fs::path(f).filename() == "wiki.test.raw")
      return Status::errorf("{} is the evaluation text; calibrate on other text", f);
  if (!std::isfinite(o.target_bpw) || o.target_bpw <= 0) return Status::errorf("--bpw must be positive (got {})", o.target_bpw);
  return check_writable_dir(o.out_path);
}

}  // namespace

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return uint64_t(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024;
  return 0;
}

Result<LearnResult> learn(const LearnOptions& opt_in) {
  LearnOptions opt = opt_in;
  GAMMA_RETURN_IF_ERROR(validate(opt));
  opt.n_threads = resolve_threads(opt.n_threads);
  if (opt.calib.text_files.empty()) opt.calib.text_files = default_calibration_files();
  opt.calib.n_threads = opt.n_threads;
  opt.calib.quiet = opt.quiet;

  // ---- inputs: pool, teacher, candidates ----------------------------------------------------
  GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(opt.pool_dir));
  GAMMA_ASSIGN_OR_RETURN(std::string pool_sha, sha256_file(opt.pool_dir + "/manifest.json"));
  GAMMA_ASSIGN_OR_RETURN(auto teacher, Model::open(opt.teacher_path));
  if (teacher->arch() != man.arch || teacher->n_layer() != man.n_layer)
    return Status::errorf("teacher {} is {} with {} layers but the pool is of {} with {} layers", opt.teacher_path,
                          teacher->arch(), teacher->n_layer(), man.arch, man.n_layer);
  std::vector<Mod> mods;
  double n_total = 0, b_min = 0, b_max = 0;
  for (const auto& e : man.modules) {
    const int64_t ti = teacher->find(e.name);
    if (ti < 0) return Status::errorf("teacher {} has no tensor {} (a teacher of another model?)", opt.teacher_path, e.name);
    if (teacher->tensors()[size_t(ti)].shape != e.shape)
      return Status::errorf("{} has another shape in the teacher than in the pool (a teacher of another model?)", e.name);
    if (e.candidates.empty()) return Status::errorf("pool module {} has no candidates", e.name);
    if (e.layer < 0 || e.layer >= man.n_layer) return Status::errorf("pool module {} has layer {}", e.name, e.layer);
    Mod m;
    m.e = &e;
    static const char* kinds[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (int k = 0; k < 7; ++k)
      if (e.kind == kinds[k]) m.kind = k;
    if (m.kind < 0) return Status::errorf("pool module {} has unknown kind {}", e.name, e.kind);
    m.K = e.candidates.size();
    for (const auto& c : e.candidates) m.bpw.push_back(c.bpw);
    m.pi.assign(m.K, 0.0);
    m.m.assign(m.K, 0.0);
    m.v.assign(m.K, 0.0);
    n_total += double(e.n_params);
    b_min += double(e.n_params) * *std::min_element(m.bpw.begin(), m.bpw.end());
    b_max += double(e.n_params) * *std::max_element(m.bpw.begin(), m.bpw.end());
    mods.push_back(std::move(m));
  }
  if (mods.empty()) return Status::errorf("pool {} has no modules", opt.pool_dir);
  b_min /= n_total;
  b_max /= n_total;
  if (opt.target_bpw < b_min - 1e-9 || opt.target_bpw > b_max + 1e-9)
    return Status::errorf("--bpw {} is outside what the pool can reach ({:.4f} .. {:.4f} bits per weight)",
                          opt.target_bpw, b_min, b_max);
  // Initial logits. "tilt": pi_b = -beta (bpw_b - bpw_0) with one beta for all modules, the
  // one that puts the expected bpw on the target: no module is preferred, the budget holds
  // from step 0, and the steps go to telling modules apart rather than to walking the
  // average down from the uniform mixture (which at lr 5e-3 alone takes hundreds of steps).
  if (opt.init == "tilt") {
    auto bhat_at = [&](double beta) {
      double b = 0;
      std::vector<double> z, pb;
      for (const auto& m : mods) {
        z.resize(m.K);
        for (size_t j = 0; j < m.K; ++j) z[j] = -beta * (m.bpw[j] - m.bpw[0]) / opt.tau;
        softmax(z, pb);
        for (size_t j = 0; j < m.K; ++j) b += double(m.e->n_params) * pb[j] * m.bpw[j];
      }
      return b / n_total;
    };
    double lo = -50, hi = 50;  // bhat falls as beta rises
    for (int it = 0; it < 200; ++it) {
      const double mid = 0.5 * (lo + hi);
      (bhat_at(mid) > opt.target_bpw ? lo : hi) = mid;
    }
    const double beta = 0.5 * (lo + hi);
    for (auto& m : mods)
      for (size_t j = 0; j < m.K; ++j) m.pi[j] = -beta * (m.bpw[j] - m.bpw[0]);
  }
  const int L = man.n_layer;
  if (opt.layers_per_step > L) return Status::errorf("--layers-per-step {} exceeds the {} layers", opt.layers_per_step, L);
  const int k_layers = opt.layers_per_step == 0 ? L : opt.layers_per_step;
  GAMMA_ASSIGN_OR_RETURN(auto store, CandidateStore::open(man));

  // ---- teacher activations and the layer ----------------------------------------------------
  GAMMA_ASSIGN_OR_RETURN(auto cache, ActivationCache::open_or_build(opt.teacher_path, opt.calib));
  if (cache->n_layer() != L) return Status::errorf("activation cache has {} layers, the pool {}", cache->n_layer(), L);
  if (opt.batch > cache->n_seq())
    return Status::errorf("--batch {} exceeds the {} calibration sequences (raise --calib-tokens)", opt.batch, cache->n_seq());
  GAMMA_ASSIGN_OR_RETURN(auto stepper, LayerStep::create(opt.teacher_path, cache->seq_len(), opt.n_threads));
  const int64_t n_embd = stepper->hparams().n_embd;

  // ---- state: fresh or from a checkpoint --------------------------------------------------
  json config = json::object();
  config["pool_manifest_sha256"] = pool_sha;
  config["teacher"] = teacher->fingerprint();
  config["target_bpw"] = opt.target_bpw;
  config["hyperparameters"] = hyperparameters(opt, cache->key(), cache->n_seq());
  const std::string ckpt_path = opt.out_path + ".ckpt";
  State st;
  st.lambda2 = opt.lambda2_init;
  LearnResult result;
  if (fs::exists(ckpt_path) && !opt.restart) {
    auto ck = read_json(ckpt_path, kCkptSchema, 1);
    if (!ck.is_ok()) {
      result.note = "ignored unreadable checkpoint " + ckpt_path + ": " + ck.status().message();
    } else if ((*ck)["config"] != config) {
      result.note = "ignored checkpoint " + ckpt_path + " of a run with other settings";
    } else {
      try {
        const json& c = *ck;
        st.step = c.at("step").get<int>();
        st.lambda1 = c.at("lambda1").get<double>();
        st.lambda2 = c.at("lambda2").get<double>();
        st.mse_ref = c.at("mse_ref").get<double>();
        st.mse_eval_init = c.at("mse_eval_init").get<double>();
        st.curve = c.at("curve");
        st.seconds = c.at("seconds").get<double>();
        const json& ms = c.at("modules");
        if (ms.size() != mods.size()) throw std::runtime_error("module count differs");
        for (size_t i = 0; i < mods.size(); ++i) {
          mods[i].pi = ms[i].at("pi").get<std::vector<double>>();
          mods[i].m = ms[i].at("m").get<std::vector<double>>();
          mods[i].v = ms[i].at("v").get<std::vector<double>>();
          if (mods[i].pi.size() != mods[i].K || mods[i].m.size() != mods[i].K || mods[i].v.size() != mods[i].K)
            throw std::runtime_error("candidate count differs");
        }
        result.resumed_from = st.step;
      } catch (const std::exception& e) {
        return Status::errorf("checkpoint {} is damaged ({}); delete it or pass --restart", ckpt_path, e.what());
      }
    }
  }
  auto save_checkpoint = [&](double seconds) -> Status {
    json c = json_header(kCkptSchema, 1);
    c["config"] = config;
    c["step"] = st.step;
    c["lambda1"] = st.lambda1;
    c["lambda2"] = st.lambda2;
    c["mse_ref"] = st.mse_ref;
    c["mse_eval_init"] = st.mse_eval_init;
    c["seconds"] = seconds;
    json ms = json::array();
    for (const auto& m : mods) ms.push_back({{"name", m.e->name}, {"pi", m.pi}, {"m", m.m}, {"v", m.v}});
    c["modules"] = ms;
    c["curve"] = st.curve;
    return write_file_atomic_nosync(ckpt_path, c.dump() + "\n");  // compact: written often
  };

  // Modules by layer and kind.
  std::vector<std::array<int, 7>> by_layer(static_cast<size_t>(L));
  for (auto& a : by_layer) a.fill(-1);
  for (size_t i = 0; i < mods.size(); ++i) by_layer[size_t(mods[i].e->layer)][size_t(mods[i].kind)] = int(i);

  // ---- optimisation ---------------------------------------------------------------------------
  const int B = opt.batch, T = cache->seq_len(), n_seq = cache->n_seq();
  std::vector<float> x(size_t(B) * size_t(T) * size_t(n_embd)), y(x.size());
  std::vector<std::vector<float>> bufs;  // one layer's candidates, reused layer after layer
  std::vector<std::vector<float>> xs;    // --objective ce: every layer's input of the step
  std::vector<std::vector<double>> p(mods.size()), pbar(mods.size()), gp(mods.size()), w(mods.size());
  // Dequantizes layer l's candidates into bufs (reused layer after layer) and points `mix`
  // at them with mixing weights w.
  auto load_layer = [&](int l, const std::vector<std::vector<double>>& w, std::array<ModuleMix, 7>& mix) -> Status {
    size_t nb = 0;
    for (int k = 0; k < 7; ++k) {
      const int mi = by_layer[size_t(l)][size_t(k)];
      if (mi < 0) continue;
      const Mod& m = mods[size_t(mi)];
      for (size_t j = 0; j < m.K; ++j, ++nb) {
        if (bufs.size() <= nb) bufs.emplace_back();
        bufs[nb].resize(size_t(m.e->n_params));
        GAMMA_RETURN_IF_ERROR(store->dequantize(*m.e, m.e->candidates[j], bufs[nb].data(), opt.n_threads));
        mix[size_t(k)].cands.push_back(bufs[nb].data());
      }
      mix[size_t(k)].p = w[size_t(mi)];
      mix[size_t(k)].grad = &gp[size_t(mi)];
    }
    return Status::ok();
  };
  // The objective at noise-free weights w over every layer, on a fixed batch (the first
  // sequences): comparable across runs and settings (full steps vs layer sampling).
  auto eval_mse = [&](const std::vector<std::vector<double>>& w) -> Result<double> {
    std::vector<int> seqs;
    for (int b = 0; b < B; ++b) seqs.push_back(b);
    double sum = 0;
    for (int l = 0; l < L; ++l) {
      GAMMA_RETURN_IF_ERROR(cache->read(l, seqs, x.data()));
      GAMMA_RETURN_IF_ERROR(cache->read(l + 1, seqs, y.data()));
      std::array<ModuleMix, 7> mix;
      GAMMA_RETURN_IF_ERROR(load_layer(l, w, mix));
      GAMMA_ASSIGN_OR_RETURN(double m, stepper->run(l, mix, x.data(), y.data(), B, 1.0, /*backward=*/false));
      sum += m / double(L);
    }
    return sum;
  };
  if (st.step == 0) {
    for (size_t i = 0; i < mods.size(); ++i) {
      std::vector<double> z(mods[i].K);
      for (size_t j = 0; j < mods[i].K; ++j) z[j] = mods[i].pi[j] / tau_at(opt, 0);
      softmax(z, pbar[i]);
    }
    GAMMA_ASSIGN_OR_RETURN(st.mse_eval_init, eval_mse(pbar));
  }
  const int start_step = st.step;
  std::unique_ptr<Progress> bar;
  if (!opt.quiet && st.step < opt.steps) bar = std::make_unique<Progress>("learn", opt.steps - st.step);
  const auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return st.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
  double t_dequant = 0, t_layer = 0, t_io = 0;
  for (int step = st.step; step < opt.steps; ++step) {
    const double tau = tau_at(opt, step);
    // Gumbel-softmax weights p (noisy, for mixing) and the noise-free pbar (budget, scores).
    Rng gumbel(opt.seed, uint64_t(step), kGumbel);
    std::vector<double> z;
    for (size_t i = 0; i < mods.size(); ++i) {
      const Mod& m = mods[i];
      z.assign(m.K, 0.0);
      for (size_t j = 0; j < m.K; ++j) z[j] = m.pi[j] / tau;
      softmax(z, pbar[i]);
      for (size_t j = 0; j < m.K; ++j) z[j] = (m.pi[j] - std::log(-std::log(gumbel.uniform_open()))) / tau;
      softmax(z, p[i]);
      gp[i].assign(m.K, 0.0);
      if (opt.estimator == "st") {  // the layer sees the sample's one candidate
        w[i].assign(m.K, 0.0);
        w[i][size_t(std::max_element(p[i].begin(), p[i].end()) - p[i].begin())] = 1.0;
      }
    }
    const auto& wmix = opt.estimator == "st" ? w : p;  // what the layers are run with
    const std::vector<int> seqs = batch_of(opt.seed, step, B, n_seq);
    const int k_step = step == 0 ? L : k_layers;  // step 0 takes all: its MSE is the MSE term's unit
    std::vector<int> layers = layers_of(opt.seed, step, L, k_step);

    double mse = 0;
    if (opt.objective == "ce") {  // chained forward keeping each layer's input, then backward
      auto t0 = std::chrono::steady_clock::now();
      const size_t n = x.size();
      xs.resize(size_t(L) + 1);
      for (auto& b : xs) b.resize(n);
      GAMMA_RETURN_IF_ERROR(cache->read(0, seqs, xs[0].data()));
      GAMMA_RETURN_IF_ERROR(cache->read(L, seqs, y.data()));
      for (int l = 0; l < L; ++l) {
        std::array<ModuleMix, 7> mix;
        GAMMA_RETURN_IF_ERROR(load_layer(l, wmix, mix));
        GAMMA_RETURN_IF_ERROR(stepper->forward(l, mix, xs[size_t(l)].data(), xs[size_t(l) + 1].data(), B));
      }
      std::vector<float> g(n), g2(n);
      GAMMA_ASSIGN_OR_RETURN(mse, stepper->head_kl(xs[size_t(L)].data(), y.data(), g.data(), B, 1.0));
      if (!std::isfinite(mse)) return Status::errorf("KL is {} at step {}", mse, step);
      for (int l = L - 1; l >= 0; --l) {
        std::array<ModuleMix, 7> mix;
        GAMMA_RETURN_IF_ERROR(load_layer(l, wmix, mix));
        GAMMA_RETURN_IF_ERROR(stepper->backward(l, mix, xs[size_t(l)].data(), g.data(), l > 0 ? g2.data() : nullptr, B));
        std::swap(g, g2);
      }
      t_layer += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      layers.clear();
      if (opt.on_layer_done) opt.on_layer_done(step, 0);
    }
    for (size_t li = 0; li < layers.size(); ++li) {
      const int l = layers[li];
      auto t0 = std::chrono::steady_clock::now();
      GAMMA_RETURN_IF_ERROR(cache->read(l, seqs, x.data()));
      GAMMA_RETURN_IF_ERROR(cache->read(l + 1, seqs, y.data()));
      auto t1 = std::chrono::steady_clock::now();
      std::array<ModuleMix, 7> mix;
      GAMMA_RETURN_IF_ERROR(load_layer(l, wmix, mix));
      auto t2 = std::chrono::steady_clock::now();
      GAMMA_ASSIGN_OR_RETURN(double mse_l, stepper->run(l, mix, x.data(), y.data(), B, 1.0 / double(k_step)));
      if (!std::isfinite(mse_l)) return Status::errorf("layer {} MSE is {} at step {}", l, mse_l, step);
      mse += mse_l / double(k_step);
      auto t3 = std::chrono::steady_clock::now();
      t_io += std::chrono::duration<double>(t1 - t0).count();
      t_dequant += std::chrono::duration<double>(t2 - t1).count();
      t_layer += std::chrono::duration<double>(t3 - t2).count();
      if (opt.on_layer_done) opt.on_layer_done(step, int(li));
    }

    // The MSE term in units of the step-0 MSE: a constant factor (the paper's objective with
    // lambda rescaled), which makes lambda's scale, and so --lr-lambda, model-independent.
    if (step == 0) st.mse_ref = mse > 0 ? mse : 1.0;
    // Budget term (global, every module every step) and the updates.
    const double bhat = expected_bpw(mods, pbar, n_total);
    const double gap = bhat - opt.target_bpw;
    double mu, loss, mse_factor = 1;
    if (opt.penalty == "dnas") {  // loss = M F, F = (1 + beta gap^2)^gamma: dL/dp = F dM/dp, dL/db = M F'
      const double base = 1.0 + opt.dnas_beta * gap * gap, F = std::pow(base, opt.dnas_gamma);
      mse_factor = F;
      mu = (mse / st.mse_ref) * opt.dnas_gamma * std::pow(base, opt.dnas_gamma - 1) * 2.0 * opt.dnas_beta * gap;
      loss = mse / st.mse_ref * F;
    } else {
      mu = st.lambda1 + 2.0 * st.lambda2 * gap;  // d(lambda1 gap + lambda2 gap^2)/d bhat
      loss = mse / st.mse_ref + st.lambda1 * gap + st.lambda2 * gap * gap;
    }
    for (auto& g : gp)
      for (double& v : g) v *= mse_factor / st.mse_ref;
    const int t = step + 1;
    for (size_t i = 0; i < mods.size(); ++i) {
      Mod& m = mods[i];
      if (m.K < 2) continue;
      std::vector<double> gpi(m.K, 0.0), gb(m.K);
      softmax_backward(p[i], gp[i], tau, gpi);
      for (size_t j = 0; j < m.K; ++j) gb[j] = mu * double(m.e->n_params) / n_total * m.bpw[j];
      softmax_backward(pbar[i], gb, tau, gpi);
      for (size_t j = (m.K == 2 ? 1 : 0); j < m.K; ++j) {  // K == 2: pi[0] stays 0 (sigmoid form)
        if (opt.optimizer == "sgd") {
          m.pi[j] -= opt.lr * gpi[j];
          continue;
        }
        m.m[j] = 0.9 * m.m[j] + 0.1 * gpi[j];
        m.v[j] = 0.999 * m.v[j] + 0.001 * gpi[j] * gpi[j];
        const double mh = m.m[j] / (1.0 - std::pow(0.9, t)), vh = m.v[j] / (1.0 - std::pow(0.999, t));
        m.pi[j] -= opt.lr * mh / (std::sqrt(vh) + 1e-8);
      }
    }
    if (opt.penalty == "al") {
      st.lambda1 += opt.lr_lambda * gap;
      st.lambda2 += opt.lr_lambda * gap * gap;
    }
    st.step = step + 1;
    st.curve.push_back({{"step", step}, {"loss", loss}, {"mse", mse}, {"bpw", bhat}, {"lambda1", st.lambda1},
                        {"lambda2", st.lambda2}, {"tau", tau}, {"seconds", elapsed()}});
    if (bar)
      bar->update(st.step - start_step, fmt::format("loss {:.4g} mse {:.4g} b {:.4f} l1 {:.3g} l2 {:.3g}", loss, mse, bhat,
                                       st.lambda1, st.lambda2));
    if (st.step % opt.checkpoint_every == 0 && st.step < opt.steps) GAMMA_RETURN_IF_ERROR(save_checkpoint(elapsed()));
  }
  if (bar) bar->finish();

  // ---- scores -----------------------------------------------------------------------------------
  const double tau = tau_at(opt, opt.steps - 1);
  json modules = json::object();
  for (size_t i = 0; i < mods.size(); ++i) {
    std::vector<double> z(mods[i].K);
    for (size_t j = 0; j < mods[i].K; ++j) z[j] = mods[i].pi[j] / tau;
    softmax(z, pbar[i]);
    json sc = json::object(), pj = json::object(), lj = json::object();
    for (size_t j = 0; j < mods[i].K; ++j) {
      const std::string& id = mods[i].e->candidates[j].id;
      sc[id] = pbar[i][j];
      pj[id] = pbar[i][j];
      lj[id] = mods[i].pi[j];
    }
    modules[mods[i].e->name] = {{"score", sc}, {"p", pj}, {"logits", lj}};
  }
  const double bhat = expected_bpw(mods, pbar, n_total);
  GAMMA_ASSIGN_OR_RETURN(const double mse_eval, eval_mse(pbar));
  json out = json_header("gamma.scores", 1);
  out["model_fingerprint"] = man.model_fingerprint;
  out["pool_manifest_sha256"] = pool_sha;
  out["teacher_fingerprint"] = teacher->fingerprint();
  out["method"] = "gamma";
  out["target_bpw"] = opt.target_bpw;
  out["hyperparameters"] = config["hyperparameters"];
  out["modules"] = modules;
  const json& last = st.curve.empty() ? json::object() : st.curve.back();
  out["final"] = {{"bpw_expected", bhat}, {"lambda1", st.lambda1}, {"lambda2", st.lambda2}, {"mse_ref", st.mse_ref},
                  {"mse_eval_init", st.mse_eval_init}, {"mse_eval", mse_eval},
                  {"loss", last.value("loss", 0.0)}, {"mse", last.value("mse", 0.0)}, {"steps", st.step}};
  out["curve"] = st.curve;
  const double secs = elapsed();
  const int done_here = opt.steps - start_step;
  out["stats"] = {{"seconds", secs},
                  {"seconds_this_process", secs - st.seconds},
                  {"steps_this_process", done_here},
                  {"seconds_per_step", done_here > 0 ? (secs - st.seconds) / done_here : 0.0},
                  {"time_split", {{"activations_io", t_io}, {"dequantize", t_dequant}, {"layer_fwd_bwd", t_layer}}},
                  {"peak_rss_bytes", peak_rss_bytes()},
                  {"threads", opt.n_threads},
                  {"resumed_from_step", result.resumed_from}};
  GAMMA_RETURN_IF_ERROR(write_json(opt.out_path, out));
  std::error_code ec;
  fs::remove(ckpt_path, ec);
  result.scores = std::move(out);
  return result;
}

}  // namespace gm
