// bench_learn: one Stage I step against the libllama F32 forward of the same tokens on the
// same threads (goal: step <= 4x forward; forward + backward alone is ~3x), steps per second
// with layer sampling, the speed levers of Stage I as token-layers per second (each variant
// against the first, measured in the same run; goal >= 3x), and (--verify) the LibTorch
// layer's match to libllama. Prints JSON.
//
//   bench_learn [--teacher F32.gguf] [--pool DIR] [--seq-len 256] [--seqs 2] [--threads 2]
//               [--steps 6] [--sample 0,4] [--variants soft,st,st:visit=16:sublayer]
//               [--calib-tokens N] [--verify] [--verify-only]
// A variant is an estimator (soft | st) with options: visit=S (--visit-steps S), sublayer
// (--forcing sublayer), vseqs=V (--visit-seqs V), seqs=B (--seqs B instead of the common one),
// measure=N (--measure-every N: the measured loss changes' cost). Its seconds per step are the mean over whole visits after step 0.
// Without --pool, a pool of the teacher is built in a temp dir (Q4_0,Q5_0,Q8_0,F16 are
// what stories260K admits). Step times are medians of steps 1.. from the run's own curve
// (step 0 builds nothing but always runs every layer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "decoder/blas.h"
#include "gguf_model/model.h"
#include "llama/log.h"
#include "learn/learn.h"
#include "decoder/activations.h"
#include "decoder/llama_runner.h"
#include "decoder/verify.h"
#include "pool/pool.h"
#include "util/json.h"
#include "util/threads.h"

namespace fs = std::filesystem;
using namespace gm;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "bench_learn: error: %s\n", msg.c_str());
  return 1;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    out.push_back(std::atoi(s.substr(i, j == std::string::npos ? std::string::npos : j - i).c_str()));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  gm::reexec_for_blas_kernel(argv);  // the kernels gamma-learn runs (decoder/blas.h)
  llama::capture_logs();
  std::string teacher = std::string(GAMMA_SHARED_DATA) + "/models/stories260K.gguf", pool;
  int seq_len = 256, batch = 2, steps = 6;
  int threads = gm::resolve_threads();
  std::string sample = "0", variants = "soft";
  int64_t calib_tokens = 0;
  bool verify = false, verify_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "missing value for %s\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--teacher") teacher = next();
    else if (a == "--pool") pool = next();
    else if (a == "--seq-len") seq_len = std::atoi(next().c_str());
    else if (a == "--seqs") batch = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--steps") steps = std::atoi(next().c_str());
    else if (a == "--sample") sample = next();
    else if (a == "--variants") variants = next();
    else if (a == "--calib-tokens") calib_tokens = std::atoll(next().c_str());
    else if (a == "--verify") verify = true;
    else if (a == "--verify-only") verify = verify_only = true;
    else return fail("unknown argument " + a);
  }
  if (seq_len < 2 || batch < 1 || steps < 2 || threads < 1) return fail("bad --seq-len/--seqs/--steps/--threads");

  if (verify_only) {  // the layer/logit match alone, on seq_len tokens of calibration text
    CalibOptions co;
    co.seq_len = seq_len;
    co.calib_tokens = seq_len;
    auto runner = LlamaRunner::open(teacher, seq_len, threads);
    if (!runner.is_ok()) return fail(runner.status().message());
    auto seqs = calibration_sequences(**runner, co);
    if (!seqs.is_ok()) return fail(seqs.status().message());
    runner->reset();
    auto v = verify_against_llama(teacher, seqs->front(), threads);
    if (!v.is_ok()) return fail(v.status().message());
    json vj = v->to_json();
    vj["teacher"] = teacher;
    vj["threads"] = threads;
    vj["max_layer_rel_err"] = *std::max_element(v->layer_rel_err.begin(), v->layer_rel_err.end());
    vj["max_layer_max_err"] = *std::max_element(v->layer_max_err.begin(), v->layer_max_err.end());
    std::printf("%s\n", vj.dump(1).c_str());
    return 0;
  }
  const fs::path tmp = fs::temp_directory_path() / ("gamma-bench-learn-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Cleanup { fs::path p; ~Cleanup() { std::error_code ec; fs::remove_all(p, ec); } } cleanup{tmp};
  if (pool.empty()) {
    PoolOptions po;
    po.model_path = teacher;
    po.types = {"Q4_0", "Q5_0", "Q8_0", "F16"};
    po.out_dir = (tmp / "pool").string();
    po.n_threads = threads;
    po.quiet = true;
    auto m = build_pool(po);
    if (!m.is_ok()) return fail(m.status().message());
    pool = po.out_dir;
  }
  auto man = Manifest::load(pool);
  if (!man.is_ok()) return fail(man.status().message());
  // A target in the middle of what the pool can reach.
  double lo = 0, hi = 0, n = 0;
  for (const auto& e : man->modules) {
    double mn = 1e9, mx = 0;
    for (const auto& c : e.candidates) { mn = std::min(mn, c.bpw); mx = std::max(mx, c.bpw); }
    lo += mn * double(e.n_params); hi += mx * double(e.n_params); n += double(e.n_params);
  }
  const double target = 0.5 * (lo + hi) / n;

  json out = json::object();
  out["bench"] = "learn";
  out["teacher"] = teacher;
  out["pool"] = pool;
  out["threads"] = threads;
  out["batch"] = batch;
  out["seq_len"] = seq_len;
  out["tokens_per_step"] = batch * seq_len;

  // libllama F32 forward of batch sequences of seq_len tokens (what one step processes).
  LearnOptions lo_opt;
  lo_opt.calib.seq_len = seq_len;
  lo_opt.calib.calib_tokens = calib_tokens > 0 ? calib_tokens : int64_t(std::max(batch * 4, 4)) * seq_len;
  lo_opt.calib.cache_root = (tmp / "act").string();
  lo_opt.calib.n_threads = threads;
  lo_opt.calib.quiet = true;
  auto cache = ActivationCache::open_or_build(teacher, lo_opt.calib);
  if (!cache.is_ok()) return fail(cache.status().message());
  {
    auto runner = LlamaRunner::open(teacher, seq_len, threads);
    if (!runner.is_ok()) return fail(runner.status().message());
    std::vector<double> t;
    LlamaRunner::Capture cap;
    for (int rep = 0; rep < 4; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int b = 0; b < batch; ++b) {
        std::vector<int32_t> seq((*cache)->tokens().begin() + int64_t(b) * seq_len,
                                 (*cache)->tokens().begin() + int64_t(b + 1) * seq_len);
        Status st = (*runner)->run(seq, &cap, false, false);
        if (!st.is_ok()) return fail(st.message());
      }
      if (rep > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    out["llama_forward_seconds"] = median(t);
  }

  // Variant names -> options; "soft" alone is the reference of the token-layer ratios.
  std::vector<std::string> names;
  for (size_t i = 0; i <= variants.size();) {
    size_t j = variants.find(',', i);
    if (j == std::string::npos) j = variants.size();
    names.push_back(variants.substr(i, j - i));
    i = j + 1;
  }
  json sampled = json::array();
  double ref_rate = 0;
  for (const std::string& name : names)
  for (int k : parse_list(sample)) {
    LearnOptions o = lo_opt;
    o.pool_dir = pool;
    o.teacher_path = teacher;
    o.out_path = (tmp / ("scores-" + std::to_string(k) + ".json")).string();
    o.target_bpw = target;
    o.seqs = batch;
    o.layers_per_step = k;
    o.n_threads = threads;
    o.checkpoint_every = 1 << 30;
    o.quiet = true;
    for (size_t i = 0; i < name.size();) {
      size_t j = name.find(':', i);
      if (j == std::string::npos) j = name.size();
      const std::string part = name.substr(i, j - i);
      i = j + 1;
      if (part == "soft") o.estimator = Estimator::kSoft;
      else if (part == "st") o.estimator = Estimator::kSt;
      else if (part == "sublayer") o.forcing = Forcing::kSublayer;
      else if (part.rfind("visit=", 0) == 0) o.visit_steps = std::atoi(part.c_str() + 6);
      else if (part.rfind("vseqs=", 0) == 0) o.visit_seqs = std::atoi(part.c_str() + 6);
      else if (part.rfind("seqs=", 0) == 0) o.seqs = std::atoi(part.c_str() + 5);
      else if (part.rfind("measure=", 0) == 0) o.measure_every = std::atoi(part.c_str() + 8);
      else return fail("unknown variant part " + part);
    }
    // Whole visits after step 0 (which runs every layer): steps 1..n are timed.
    const int n = (steps + o.visit_steps - 1) / o.visit_steps * o.visit_steps;
    o.steps = n + 1;
    auto r = learn(o);
    if (!r.is_ok()) return fail(r.status().message());
    const json& curve = r->scores["curve"];
    std::vector<double> dt;
    for (size_t i = 2; i < curve.size(); ++i)
      dt.push_back(curve[i]["seconds"].get<double>() - curve[i - 1]["seconds"].get<double>());
    const double s = median(dt);
    const double mean = (curve.back()["seconds"].get<double>() - curve[0]["seconds"].get<double>()) / double(n);
    const int layers = k == 0 ? (*cache)->n_layer() : k;
    const double rate = double(o.seqs) * seq_len * layers / mean;  // token-layers per second
    if (ref_rate == 0) ref_rate = rate;
    json row = {{"variant", name}, {"seqs", o.seqs}, {"layers_per_step", k}, {"steps_timed", n}, {"seconds_per_step", s},
                {"steps_per_second", s > 0 ? 1.0 / s : 0.0}, {"mean_seconds_per_step", mean},
                {"token_layers_per_second", rate}, {"speedup_vs_first", rate / ref_rate},
                {"time_split", r->scores["stats"]["time_split"]}, {"peak_rss_bytes", peak_rss_bytes()},
                {"mse_eval_init", r->scores["final"]["mse_eval_init"]}, {"mse_eval", r->scores["final"]["mse_eval"]}};
    if (k == 0 && name == names.front()) {
      out["step_seconds"] = s;
      out["ratio"] = s / out["llama_forward_seconds"].get<double>();
      out["goal_ratio"] = 4.0;
      out["meets_goal"] = out["ratio"].get<double>() <= 4.0;
    }
    std::fprintf(stderr, "bench_learn: %s k=%d: %.0f token-layers/s (%.2fx)\n", name.c_str(), k, rate, rate / ref_rate);
    sampled.push_back(row);
  }
  out["levers_goal_speedup"] = 3.0;
  out["runs"] = sampled;
  if (verify) {
    std::vector<int32_t> seq((*cache)->tokens().begin(), (*cache)->tokens().begin() + seq_len);
    auto v = verify_against_llama(teacher, seq, threads);
    if (!v.is_ok()) return fail(v.status().message());
    json vj = v->to_json();
    vj["max_layer_rel_err"] = *std::max_element(v->layer_rel_err.begin(), v->layer_rel_err.end());
    vj["max_layer_max_err"] = *std::max_element(v->layer_max_err.begin(), v->layer_max_err.end());
    out["verify"] = vj;
  }
  out["peak_rss_bytes"] = peak_rss_bytes();
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
