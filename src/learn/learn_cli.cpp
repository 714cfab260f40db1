#include "learn/learn_cli.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "gguf_model/model.h"
#include "llama/log.h"

namespace gm {

void add_learn_options(CLI::App* c, LearnOptions* o) {
  c->add_option("pool", o->pool_dir, "pool directory (gamma pool)")->required();
  c->add_option("--teacher", o->teacher_path, "full-precision teacher GGUF of the same model (gamma dequantize)")->required();
  c->add_option("--bpw", o->target_bpw, "target average bits per weight of the linear modules")->capture_default_str();
  c->add_option("-o,--output", o->out_path, "SCORES.json to write")->required();
  c->add_option("--steps", o->steps, "optimisation steps")->capture_default_str();
  c->add_option("--batch", o->batch, "calibration sequences per step")->capture_default_str();
  c->add_option("--layers-per-step", o->layers_per_step,
                "layers sampled per step (unbiased, MSE scaled); 0: all layers")->capture_default_str();
  c->add_option("--optimizer", o->optimizer, "adam or sgd (for the logits pi)")->capture_default_str();
  c->add_option("--lr", o->lr, "learning rate of the logits pi")->capture_default_str();
  c->add_option("--lr-lambda", o->lr_lambda, "gradient-ascent step of lambda1 and lambda2")->capture_default_str();
  c->add_option("--lambda2-init", o->lambda2_init, "initial lambda2 (damps the budget's oscillation)")->capture_default_str();
  c->add_option("--objective", o->objective, "task term: mse (teacher-forced layer MSE, GAMMA) or ce (ablation: KL of the final logits vs the teacher, all layers chained)")->capture_default_str();
  c->add_option("--estimator", o->estimator, "soft (Gumbel-softmax mixture, GAMMA) or st (straight-through: the layer runs on the sampled candidate)")->capture_default_str();
  c->add_option("--penalty", o->penalty, "budget term: al (augmented Lagrangian, GAMMA) or dnas (ablation: mse (1 + beta gap^2)^gamma)")->capture_default_str();
  c->add_option("--dnas-beta", o->dnas_beta, "beta of --penalty dnas")->capture_default_str();
  c->add_option("--dnas-gamma", o->dnas_gamma, "gamma of --penalty dnas")->capture_default_str();
  c->add_option("--tau", o->tau, "Gumbel-softmax temperature")->capture_default_str();
  c->add_option("--tau-end", o->tau_end, "anneal tau exponentially to this by the last step (0: fixed)")->capture_default_str();
  c->add_option("--init", o->init, "initial logits: tilt (on budget, no preference) or uniform")->capture_default_str();
  c->add_option("--seed", o->seed, "random seed (Gumbel noise, batches, layer samples)")->capture_default_str();
  c->add_option("-t,--threads", o->n_threads, "threads (default: all cores)");
  c->add_option("--checkpoint-every", o->checkpoint_every, "write OUTPUT.ckpt every N steps")->capture_default_str();
  c->add_flag("--restart", o->restart, "ignore a checkpoint of an earlier run");
  c->add_option("--calib", o->calib.text_files,
                "calibration text files (default: war-and-peace.txt, wiki.valid.tokens from ../shared/data/text)");
  c->add_option("--calib-tokens", o->calib.calib_tokens, "calibration tokens (whole sequences)")->capture_default_str();
  c->add_option("--seq-len", o->calib.seq_len, "tokens per calibration sequence")->capture_default_str();
  c->add_flag("--f32-activations", o->calib.f32, "cache teacher activations as F32 instead of F16");
  c->add_option("--cache-dir", o->calib.cache_root, "activation cache directory (default: GAMMA cache/activations)");
  c->add_flag("-q,--quiet", o->quiet, "no progress bars");
}

int learn_main(int argc, char** argv) {
  llama::capture_logs();
  LearnOptions o;
  CLI::App app{"Stage I: learn per-module candidate scores (GAMMA; resumable)", "gamma learn"};
  add_learn_options(&app, &o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "gamma: error: %s\n", e.what());
    return e.get_exit_code();
  }
  // Fault injection for the kill-and-resume test: SIGKILL after the first layer of step N.
  if (const char* k = std::getenv("GAMMA_TEST_KILL_AT_STEP"); k && *k) {
    const int kill_at = std::atoi(k);
    o.on_layer_done = [kill_at](int step, int layer_in_step) {
      if (step == kill_at && layer_in_step == 0) std::raise(SIGKILL);
    };
  }
  auto r = learn(o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "gamma: error: %s\n", r.status().message().c_str());
    return 1;
  }
  if (!r->note.empty()) std::fprintf(stderr, "gamma: note: %s\n", r->note.c_str());
  const auto& f = r->scores["final"];
  std::printf("%s: %zu modules, expected %.4f bpw (target %.4f), mse %.4g, lambda1 %.4g, lambda2 %.4g%s\n",
              o.out_path.c_str(), r->scores["modules"].size(), f["bpw_expected"].get<double>(), o.target_bpw,
              f["mse"].get<double>(), f["lambda1"].get<double>(), f["lambda2"].get<double>(),
              r->resumed_from >= 0 ? (" (resumed at step " + std::to_string(r->resumed_from) + ")").c_str() : "");
  return 0;
}

}  // namespace gm
