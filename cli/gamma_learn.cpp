// gamma-learn: the LibTorch programs behind `gamma learn` and `gamma hawq` (cmd_learn.cpp
// execs it; argv[1] == "hawq" selects the HAWQ-V2 scorer). Stage I lives in its own
// executable so that only it loads LibTorch: linking LibTorch into `gamma` cost every
// invocation ~0.7 s of library start-up (measured), on every subcommand. Every error ends as
// one line (util/main_guard.h), LibTorch's included.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>

#include "llama/log.h"
#include "decoder/blas.h"
#include "hawq/hawq.h"
#include "learn/learn.h"
#include "util/main_guard.h"

namespace gm {
namespace {

// Options shared by learn and hawq: the pool, the teacher, the output, the calibration data.
void add_common(CLI::App& app, std::string* pool, std::string* teacher, std::string* out, int* seqs, int* threads,
                CalibOptions* calib, bool* quiet) {
  app.add_option("pool", *pool, "pool directory (gamma pool)")->required();
  app.add_option("--teacher", *teacher, "full-precision teacher GGUF of the same model (gamma dequantize)")->required();
  app.add_option("-o,--output", *out, "SCORES.json to write")->required();
  app.add_option("--seqs", *seqs, "calibration sequences per step (learn) or of the layer loss (hawq)")
      ->capture_default_str();
  app.add_option("-t,--threads", *threads, "threads (default: all cores)");
  app.add_option("--calib", calib->text_files,
                 "calibration text files (default: gamma run's, the first 40,000 bytes of war-and-peace.txt then 36,000 of python-calib.txt)");
  app.add_option("--calib-tokens", calib->calib_tokens, "calibration tokens (whole sequences)")->capture_default_str();
  app.add_option("--seq-len", calib->seq_len, "tokens per calibration sequence")->capture_default_str();
  app.add_flag("--f32-activations", calib->f32, "cache teacher activations as F32 instead of F16");
  app.add_option("--cache-dir", calib->cache_root, "activation cache directory (default: GAMMA cache/activations)");
  app.add_flag("-q,--quiet", *quiet, "no progress bar");
}

// A layer-sharded job (learn/dist.h), for learn and hawq alike.
void add_dist(CLI::App& app, int* world_size, int* rank, std::string* rendezvous, double* timeout) {
  app.add_option("--world-size", *world_size, "processes of a layer-sharded job (each owns a contiguous range of layers)")->capture_default_str();
  app.add_option("--rank", *rank, "this process's rank in 0..world-size-1 (rank 0 writes the scores)")->capture_default_str();
  app.add_option("--rendezvous", *rendezvous, "where the ranks meet: tcp://HOST:PORT (rank 0 serves) or file://PATH (fresh per job)");
  app.add_option("--dist-timeout", *timeout, "seconds a rank waits for the others before failing")->capture_default_str();
}

// CLI11 parse with gamma's one-line errors; returns -1 to go on, else the exit code.
int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "gamma: error: %s\n", e.what());
    return e.get_exit_code();
  }
  return -1;
}

int fail(const Status& s) {
  std::fprintf(stderr, "gamma: error: %s\n", s.message().c_str());
  return 1;
}

int learn_main(int argc, char** argv) {
  llama::capture_logs();
  LearnOptions o;
  std::string objective = "mse", penalty = "al", optimizer = "adam", estimator = "soft", init = "tilt",
              forcing = "layer", layer_loss = "mse";
  CLI::App app{"Stage I: learn per-module candidate scores (GAMMA; resumable)", "gamma learn"};
  add_common(app, &o.pool_dir, &o.teacher_path, &o.out_path, &o.seqs, &o.n_threads, &o.calib, &o.quiet);
  app.add_option("--bpw", o.target_bpw, "target average bits per weight of the linear modules")->capture_default_str();
  app.add_option("--steps", o.steps, "optimisation steps")->capture_default_str();
  app.add_option("--layers-per-step", o.layers_per_step,
                 "layers sampled per step (unbiased, MSE scaled); 0: all layers")->capture_default_str();
  app.add_option("--optimizer", optimizer, "adam or sgd (for the logits pi)")->capture_default_str();
  app.add_option("--lr", o.lr, "learning rate of the logits pi")->capture_default_str();
  app.add_option("--lr-lambda", o.lr_lambda, "gradient-ascent step of lambda1 and lambda2")->capture_default_str();
  app.add_option("--lambda2-init", o.lambda2_init, "initial lambda2 (damps the budget's oscillation)")->capture_default_str();
  app.add_option("--objective", objective, "task term: mse (teacher-forced layer MSE, GAMMA) or ce (ablation: KL of the final logits vs the teacher, all layers chained)")->capture_default_str();
  app.add_option("--estimator", estimator, "soft (Gumbel-softmax mixture, GAMMA) or st (straight-through: the layer runs on the sampled candidate)")->capture_default_str();
  app.add_option("--forcing", forcing, "layer (each layer on the teacher's input, GAMMA) or sublayer (the FFN on the teacher's mid-layer residual too; q/k/v/gate/up candidates' outputs cached per visit)")->capture_default_str();
  app.add_option("--layer-loss", layer_loss, "mse (the layer's squared error, GAMMA), rel (each token's over the teacher's mean square there: what the next RMSNorm reads) or clip (mse, a token above 10x the median token's mean square brought to that scale)")->capture_default_str();
  app.add_option("--visit-steps", o.visit_steps, "steps the drawn layers stay for (candidates dequantized once per visit)")->capture_default_str();
  app.add_option("--visit-seqs", o.visit_seqs, "sequences a --forcing sublayer visit holds, a multiple of --seqs (0: --seqs)")->capture_default_str();
  app.add_option("--penalty", penalty, "budget term: al (augmented Lagrangian, GAMMA) or dnas (ablation: mse (1 + beta gap^2)^gamma)")->capture_default_str();
  app.add_option("--dnas-beta", o.dnas_beta, "beta of --penalty dnas")->capture_default_str();
  app.add_option("--dnas-gamma", o.dnas_gamma, "gamma of --penalty dnas")->capture_default_str();
  app.add_option("--measure-every", o.measure_every, "with --forcing sublayer: every Nth step also measures each candidate's loss change in the sampled assignment (SCORES.json \"delta\", solved by gamma solve --transform delta); 0: off")->capture_default_str();
  app.add_option("--converge", o.converge, "with --measure-every and --visit-steps > 1: end a visit once every module of its layers has its mean measured deltas within this standard error, relative to its largest |mean| (from its 3rd measurement on); 0: every step of every visit")->capture_default_str();
  app.add_option("--tau", o.tau, "Gumbel-softmax temperature")->capture_default_str();
  app.add_option("--tau-end", o.tau_end, "anneal tau exponentially to this by the last step (0: fixed)")->capture_default_str();
  app.add_option("--init", init, "initial logits: tilt (on budget, no preference) or uniform")->capture_default_str();
  app.add_option("--init-plan", o.init_plan, "warm start: a plan (gamma solve, e.g. of HAWQ-V2 at this --bpw) whose candidate starts as each module's mode");
  app.add_option("--init-weight", o.init_weight, "p of --init-plan's candidate at step 0")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (Gumbel noise, batches, layer samples)")->capture_default_str();
  add_dist(app, &o.world_size, &o.rank, &o.rendezvous, &o.dist_timeout);
  app.add_option("--checkpoint-every", o.checkpoint_every, "write OUTPUT.ckpt every N steps")->capture_default_str();
  app.add_flag("--restart", o.restart, "ignore a checkpoint of an earlier run");
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  // The variants, parsed once: from here on they are enums.
  Status bad = Status::ok();
  auto pick = [&bad](auto& field, const std::string& s) {
    auto r = parse_choice<std::decay_t<decltype(field)>>(s);
    if (r.is_ok()) field = *r;
    else if (bad.is_ok()) bad = r.status();
  };
  pick(o.objective, objective);
  pick(o.estimator, estimator);
  pick(o.penalty, penalty);
  pick(o.init, init);
  pick(o.forcing, forcing);
  pick(o.layer_loss, layer_loss);
  pick(o.optimizer, optimizer);
  if (!bad.is_ok()) return fail(bad);
  // Fault injection for the kill-and-resume test: SIGKILL after the first layer of step N.
  if (const char* k = std::getenv("GAMMA_TEST_KILL_AT_STEP"); k && *k) {
    const int kill_at = std::atoi(k);
    o.on_layer_done = [kill_at](int step, int layer_in_step) {
      if (step == kill_at && layer_in_step == 0) std::raise(SIGKILL);
    };
  }
  // ... and after the Nth sequence of building the activation cache.
  if (const char* k = std::getenv("GAMMA_TEST_KILL_AT_SEQUENCE"); k && *k) {
    const int kill_at = std::atoi(k);
    o.calib.on_sequence = [kill_at](int done) {
      if (done == kill_at) std::raise(SIGKILL);
    };
  }
  auto r = learn(o);
  if (!r.is_ok()) return fail(r.status());
  if (o.rank > 0) {  // rank 0 reports the scores
    std::printf("rank %d of %d done: peak RSS %.1f MiB\n", o.rank, o.world_size, double(peak_rss_bytes()) / (1 << 20));
    return 0;
  }
  if (!r->note.empty()) std::fprintf(stderr, "gamma: note: %s\n", r->note.c_str());
  const auto& f = r->scores["final"];
  std::printf("%s: %zu modules, expected %.4f bpw (target %.4f), mse %.4g, lambda1 %.4g, lambda2 %.4g%s\n",
              o.out_path.c_str(), r->scores["modules"].size(), f["bpw_expected"].get<double>(), o.target_bpw,
              f["mse"].get<double>(), f["lambda1"].get<double>(), f["lambda2"].get<double>(),
              r->resumed_from >= 0 ? (" (resumed at step " + std::to_string(r->resumed_from) + ")").c_str() : "");
  return 0;
}

int hawq_main(int argc, char** argv) {
  llama::capture_logs();  // libllama's load chatter (activation cache) only on failure
  HawqOptions o;
  CLI::App app{"HAWQ-V2 scores: Hutchinson Hessian trace x squared perturbation per module and candidate", "gamma hawq"};
  add_common(app, &o.pool_dir, &o.teacher_path, &o.out_path, &o.seqs, &o.n_threads, &o.calib, &o.quiet);
  app.add_option("--samples", o.samples, "Hutchinson probes per layer (the most, with --converge)")->capture_default_str();
  app.add_option("--converge", o.converge,
                 "end a layer's probes once every module's trace is known to this relative standard error "
                 "(from the 3rd probe on; 0: all --samples)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed of the probes")->capture_default_str();
  app.add_option("--traces-from", o.traces_from,
                 "reuse the Hessian traces of this HAWQ-V2 SCORES.json (same teacher, probes, seed, calibration): "
                 "only the pool's perturbations are measured");
  add_dist(app, &o.world_size, &o.rank, &o.rendezvous, &o.dist_timeout);
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  // Fault injection for the kill-and-resume test: SIGKILL once layer N is checkpointed.
  if (const char* k = std::getenv("GAMMA_TEST_KILL_AT_LAYER"); k && *k) {
    const int kill_at = std::atoi(k);
    o.on_layer_done = [kill_at](int layer) {
      if (layer == kill_at) std::raise(SIGKILL);
    };
  }
  auto r = hawq_scores(o);
  if (!r.is_ok()) return fail(r.status());
  if (o.rank > 0) {
    std::printf("rank %d of %d done: peak RSS %.1f MiB\n", o.rank, o.world_size, double(peak_rss_bytes()) / (1 << 20));
    return 0;
  }
  std::printf("%s: HAWQ-V2 scores of %zu modules (%d probes per layer, %.1f s)\n", o.out_path.c_str(),
              (*r)["modules"].size(), o.samples, (*r)["stats"]["seconds"].get<double>());
  return 0;
}

}  // namespace
}  // namespace gm

int main(int argc, char** argv) {
  gm::reexec_for_blas_kernel(argv);  // before any LibTorch work; see decoder/blas.h
  return gm::guarded_main([&] {
    // The BLAS kernels this process ended up with (tests: the re-exec took effect).
    if (argc == 2 && std::strcmp(argv[1], "--blas-kernel") == 0) {
      std::printf("%s\n", gm::blas_kernel().c_str());
      return 0;
    }
    // Fault injection for the error-contract test: a LibTorch exception nobody catches.
    if (const char* f = std::getenv("GAMMA_FAULT"); f && std::strcmp(f, "torch") == 0) at::zeros({2}).view({3});
    if (argc > 1 && std::strcmp(argv[1], "hawq") == 0) return gm::hawq_main(argc - 1, argv + 1);
    return gm::learn_main(argc, argv);
  });
}
