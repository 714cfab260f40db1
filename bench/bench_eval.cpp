// bench_eval: wall time of gamma's evaluation (run_eval, in process: model load, hashing,
// tokenization, decoding, scoring) against the built llama-perplexity (a subprocess) on the
// same model, text, chunks, batch and threads. Runs alternate and the best of --reps counts,
// so a busy machine penalises neither side. Goal: speed_ratio = llama / gamma >= 0.9.
//
//   bench_eval [--model M] [--text T] [--ctx 128] [--chunks 400] [--threads N] [--reps 3]
//              [--batch 2048] [--ubatch 512] [--teacher T.gguf]   (KL mode: both read a precomputed teacher base file)
// Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval.h"
#include "util/threads.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Cmd {
  int rc;
  std::string out;
};

Cmd run(const std::string& cmd) {
  Cmd c{-1, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return c;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) c.out.append(buf, n);
  c.rc = pclose(p);
  return c;
}

double loadavg() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "bench_eval: %s\n", msg.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(GAMMA_SHARED_DATA) + "/models/stories260K.gguf";
  std::string text = std::string(GAMMA_SHARED_DATA) + "/text/tinystories-valid-prefix.txt";
  std::string teacher, base_file = "/tmp/bench_eval_base.kld";
  int ctx = 128, chunks = 400, reps = 3, batch = 2048, ubatch = 512;
  int threads = gm::resolve_threads();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--model") model = next();
    else if (a == "--text") text = next();
    else if (a == "--teacher") teacher = next();
    else if (a == "--ctx") ctx = std::stoi(next());
    else if (a == "--chunks") chunks = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--batch") batch = std::stoi(next());
    else if (a == "--ubatch") ubatch = std::stoi(next());
    else if (a == "--base-file") base_file = next();
    else die("unknown argument " + a);
  }
  const std::string perplexity = std::string(GAMMA_LLAMA_BIN) + "/llama-perplexity";
  const std::string common = " -c " + std::to_string(ctx) + " --chunks " + std::to_string(chunks) + " -b " +
                             std::to_string(batch) + " -ub " + std::to_string(ubatch) + " -t " + std::to_string(threads);
  const bool kld = !teacher.empty();

  gm::eval::EvalRequest req;
  req.model = model;
  req.n_ctx = ctx;
  req.n_chunks = chunks;
  req.n_batch = batch;
  req.n_ubatch = ubatch;
  req.n_threads = threads;
  req.progress = false;
  std::string llama_cmd;
  if (kld) {
    // Untimed setup: the teacher's base file for llama, gamma's cache for gamma.
    Cmd b = run(perplexity + " -m " + teacher + " -f " + text + common + " --kl-divergence-base " + base_file);
    if (b.rc != 0) die("llama-perplexity (base) failed:\n" + b.out);
    req.teacher = teacher;
    req.text = text;
    auto warm = gm::eval::run_eval(req);
    if (!warm.is_ok()) die(warm.status().message());
    llama_cmd = perplexity + " -m " + model + common + " --kl-divergence-base " + base_file + " --kl-divergence";
  } else {
    req.text = text;
    llama_cmd = perplexity + " -m " + model + " -f " + text + common;
  }

  std::vector<double> tg, tl;
  double ppl_g = 0, ppl_l = 0, kld_g = 0, kld_l = 0;
  const double load_before = loadavg();
  for (int r = 0; r < reps; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool gamma_first = r % 2 == 0;
      if ((side == 0) == gamma_first) {
        auto t0 = Clock::now();
        auto res = gm::eval::run_eval(req);
        tg.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (!res.is_ok()) die(res.status().message());
        ppl_g = res->perplexity->ppl.value_or(NAN);
        if (kld) kld_g = res->kld->mean.value_or(NAN);
      } else {
        auto t0 = Clock::now();
        Cmd c = run(llama_cmd);
        tl.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (c.rc != 0) die("llama-perplexity failed:\n" + c.out);
        std::smatch m;
        if (kld) {
          if (std::regex_search(c.out, m, std::regex(R"(Mean PPL\(Q\)\s+:\s+([0-9.]+))"))) ppl_l = std::stod(m[1]);
          if (std::regex_search(c.out, m, std::regex(R"(Mean    KLD:\s+([0-9.]+))"))) kld_l = std::stod(m[1]);
        } else if (std::regex_search(c.out, m, std::regex(R"(Final estimate: PPL = ([0-9.]+))"))) {
          ppl_l = std::stod(m[1]);
        }
      }
    }
  }
  const double bg = *std::min_element(tg.begin(), tg.end());
  const double bl = *std::min_element(tl.begin(), tl.end());
  nlohmann::ordered_json j;
  j["bench"] = "eval";
  j["mode"] = kld ? "kld" : "ppl";
  j["model"] = model;
  if (kld) j["teacher"] = teacher;
  j["text"] = text;
  j["ctx"] = ctx;
  j["chunks"] = chunks;
  j["batch"] = batch;
  j["ubatch"] = ubatch;
  j["threads"] = threads;
  j["reps"] = reps;
  j["gamma_seconds"] = tg;
  j["llama_perplexity_seconds"] = tl;
  j["gamma_best_s"] = bg;
  j["llama_perplexity_best_s"] = bl;
  j["gamma_tokens_per_s"] = double(chunks) * ctx / bg;
  j["speed_ratio"] = bl / bg;  // > 1: gamma faster
  j["goal"] = 0.9;
  j["meets_goal"] = bl / bg >= 0.9;
  j["ppl_gamma"] = ppl_g;
  j["ppl_llama_perplexity"] = ppl_l;
  if (kld) {
    j["kld_gamma"] = kld_g;
    j["kld_llama_perplexity"] = kld_l;
  }
  j["loadavg_before"] = load_before;
  j["loadavg_after"] = loadavg();
  std::printf("%s\n", j.dump(1).c_str());
  return 0;
}
