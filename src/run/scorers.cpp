// gamma run's scorers: each one's scores measured once and cached in the work directory (the
// static proxy needs none; HAWQ-V2's traces, Stage I's scores and gamma layers' measurement are
// child processes), and the solve arguments of every variant they give.
#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "decoder/activations.h"
#include "decoder/hparams.h"
#include "emit/emit.h"
#include "run/pipeline.h"
#include "run/proc.h"

namespace fs = std::filesystem;

namespace gm::run {

void choose_scorers(Env& e, const std::string& arch) {
  e.scorers.clear();
  std::string skipped;
  const Status decoder = check_decoder_architecture(arch);
  bool measured = false;  // a scorer that measures, besides the static proxy
  for (const auto& s : e.o.scorers) {
    if (!decoder.is_ok() && (s == "hawq" || s == "gamma")) {
      skipped += (skipped.empty() ? "" : ", ") + s;
    } else {
      e.scorers.push_back(s);
      measured |= s != "static";
    }
  }
  if (skipped.empty()) return;
  // Without Stage I, the layer measurement still rescales the static proxy.
  if (!measured) e.scorers.push_back("static-cal");
  std::printf("== scorers: %s skipped (%s)%s\n", skipped.c_str(), decoder.message().c_str(),
              measured ? "" : "; static-cal (the static proxy rescaled by gamma layers) tried instead");
}

// gamma learn's steps (RunOptions::steps, 0: every layer visited once) and their estimated
// time: a step runs layers_per_step layers, every 2nd also measures each candidate (~K times
// a forward, about doubling the step's cost).
int learn_steps(const Env& e) {
  if (e.o.steps > 0) return e.o.steps;
  const int per = e.o.layers_per_step > 0 ? e.o.layers_per_step : e.ms.n_layer;
  return 1 + (e.ms.n_layer + per - 1) / per * e.o.visit_steps;
}
// --converge: the share of the schedule that runs, measured on SmolLM2's default job at 0.2
// (145 of 481 steps) and 0.1 (193): results/converge_smollm2/.
bool converges(const Env& e) { return e.o.converge > 0 && e.o.visit_steps > 1; }
bool learn_shares_hawq_activations(const Env& e) {
  return e.o.calib_tokens == e.o.hawq_calib_tokens && std::count(e.scorers.begin(), e.scorers.end(), "hawq") > 0;
}
double learn_estimate(const Env& e) {
  const double share = !converges(e) ? 1.0 : e.o.converge >= 0.2 ? 0.30 : 0.40;
  // + the teacher's activations on the calibration tokens (the cache Stage I reads; HAWQ-V2's
  // is on fewer tokens): 96 of Gemma-3-270M's 239 s, priced at 0 before.
  return 2.0 * learn_seconds(e.ms, learn_steps(e), e.o.layers_per_step, 1024) * share +
         (learn_shares_hawq_activations(e) ? 0 : teacher_seconds(e.ms, e.o.calib_tokens)) + stream_learn_seconds(e);
}
// gamma layers: the source's file and one file per layer, each emitted and measured on
// --layers-chunks chunks of the calibration text. Where the model can be cut before a layer, layer
// l's file is its layers from l on (layers/layers.h), priced as (n_layer - l) / n_layer of a whole
// file: on Qwen-1.5B the 29 files took 895 s against 1,740 s whole (0.514x; this prices 0.534x),
// results/layers_cut_qwen/.
double layers_estimate(const Env& e) {
  const double tok = double(e.o.layers_chunks) * e.o.eval_ctx;
  const int n = std::max(1, e.ms.n_layer);
  const double whole = emit_seconds(e.ms) + eval_seconds(e.ms, tok, true);
  double files = whole;  // the base file
  for (int l = 0; l < n; ++l) files += starts_at_any_layer(e.arch) ? whole * double(n - l) / n : whole;
  return files + teacher_seconds(e.ms, tok) + stream_layers_seconds(e);
}

namespace {

// gamma layers' measurement (LAYERS.json), made once.
Result<std::string> measure_layers(Env& e) {
  const std::string lf = e.W + "/layers.json";
  // The teacher's log-probs on the calibration chunks: read by gamma layers alone (it resumes
  // from them), so removed once its measurement is written (0.31 GB on Qwen-1.5B).
  const std::string base =
      fmt::format("{}/teacher-calib-{}-c{}-n{}.kld", e.W, fs::path(e.calib).stem().string(), e.o.eval_ctx, e.o.layers_chunks);
  if (file_exists(lf)) {
    // Kept across runs in the work directory, so only a measurement on as many chunks is reused.
    GAMMA_ASSIGN_OR_RETURN(json j, read_json(lf, "gamma.layers", 1));
    const json cfg = j.contains("info") ? j["info"].value("config", json::object()) : json::object();
    const int had = cfg.value("chunks", e.o.layers_chunks);
    if (had != e.o.layers_chunks)
      return Status::errorf("{} was measured on {} chunks, not --layers-chunks {}: remove it to measure again", lf, had,
                            e.o.layers_chunks);
  } else {
    std::vector<std::string> cmd = {e.G, "layers", e.pool, "--teacher", e.teacher, "--calib", e.calib, "-c",
                                    std::to_string(e.o.eval_ctx), "--chunks", std::to_string(e.o.layers_chunks),
                                    "--kld-base", base, "-t", e.T, "-o", lf};
    for (const auto& x : e.q()) cmd.push_back(x);
    GAMMA_RETURN_IF_ERROR(e.stage("layers -> " + lf, layers_estimate(e), [&] { return run_step("layers", cmd); }));
  }
  std::error_code ec;
  fs::remove(base, ec);
  return lf;
}

}  // namespace

std::string activations_before_path(const Env& e) { return e.W + "/activations-before.json"; }

Status drop_activations(Env& e) {
  GAMMA_ASSIGN_OR_RETURN(json before, read_json(activations_before_path(e), "gamma.run.activations", 1));
  const auto kept = before.value("keys_before", std::vector<std::string>{});
  // The entries this job's scorers read: each scores file names its own.
  std::set<std::string> keys;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(e.W, ec)) {
    const std::string name = f.path().filename().string();
    if (name.rfind("scores-", 0) != 0 || f.path().extension() != ".json") continue;
    auto j = read_json(f.path().string(), "gamma.scores", 1);
    if (!j.is_ok() || !j->contains("hyperparameters")) continue;
    const json& h = (*j)["hyperparameters"];
    if (h.contains("activations") && h["activations"].contains("key")) keys.insert(h["activations"]["key"].get<std::string>());
  }
  const std::string root = activation_cache_root({});
  for (const auto& k : keys) {
    if (std::find(kept.begin(), kept.end(), k) != kept.end()) continue;
    const uint64_t bytes = dir_bytes(root + "/" + k);
    GAMMA_ASSIGN_OR_RETURN(bool dropped, drop_activation_cache(root, k));
    if (dropped)
      std::printf("   the scorers' calibration activations dropped (%.1f MiB of gamma's cache; nothing later reads them)\n",
                  double(bytes) / (1 << 20));
  }
  std::fflush(stdout);
  return Status::ok();
}

Result<std::vector<Scorer>> prepare_scorers(Env& e, double learn_bpw) {
  std::vector<Scorer> out;
  std::string hawq_file, gamma_file;  // for the blend of the two
  for (const auto& s : e.scorers) {
    if (s == "static") {
      out.push_back({s, {"--score-from-manifest"}});
    } else if (s == "hawq") {
      const std::string f = e.W + "/scores-hawq.json";
      if (!file_exists(f)) {
        const std::vector<std::string> cmd = hawq_cmd(e, e.pool, f);
        const bool reused = file_exists(hawq_traces_path(e));
        GAMMA_RETURN_IF_ERROR(e.stage(reused ? "hawq (the estimate's traces) -> " + f : "hawq -> " + f,
                                      reused ? hawq_rescore_seconds(e.ms, e.o.stream_pool) : hawq_seconds(e.ms, e.o.hawq_samples, e.o.hawq_calib_tokens),
                                      [&] { return run_step("hawq", cmd); }));
      }
      out.push_back({s, {"--scores", f}});
      hawq_file = f;
      // HAWQ-V2's own calibration activations are read by nothing after it: dropped before Stage I
      // makes its window (the job's disk peaks there, in POOL/stream/ beside Stage I's activations:
      // on Qwen-1.5B 0.35 GB less). Not when Stage I reads as many tokens (the default: the same entry).
      if (!learn_shares_hawq_activations(e)) GAMMA_RETURN_IF_ERROR(drop_activations(e));
    } else if (s == "gamma") {
      // gamma layers first (it reads nothing of Stage I's): run after Stage I it added a layer's
      // file and its log-probs to the job's disk peak, beside the window Stage I made (Qwen-1.5B
      // at 880MiB: 9.06 GB there, 8.00 GB at Stage I's end; results/job_cost_qwen_880_calib4k/).
      // Its layer scale rescales Stage I's deltas layer by layer to each layer's measured KLD: on
      // Qwen the layer MSE misjudges the scale between layers, and so rescaled the deltas won every
      // size from IQ2_M to 3.25 bpw on validation and test (results/iq_qwen/goal_table.md).
      GAMMA_ASSIGN_OR_RETURN(std::string lf, measure_layers(e));
      std::string f = e.o.scores;
      if (f.empty()) {
        const std::string tag = fmt::format("{:.3g}", learn_bpw);
        f = e.W + "/scores-gamma-" + tag + (converges(e) ? fmt::format("-c{:g}", e.o.converge) : "") + ".json";
        if (!file_exists(f)) {
          std::vector<std::string> cmd = {e.G, "learn", e.pool, "--teacher", e.teacher, "--bpw", tag, "--steps",
                                          std::to_string(learn_steps(e)), "--layers-per-step", std::to_string(e.o.layers_per_step),
                                          "--visit-steps", std::to_string(e.o.visit_steps), "--forcing", "sublayer",
                                          "--estimator", "st", "--measure-every", "2", "--lr", "0.05", "--tau-end", "0.05",
                                          "--layer-loss", "clip",
                                          "--calib-tokens", std::to_string(e.o.calib_tokens), "--seq-len", std::to_string(kCalibSeqLen), "--calib", e.calib, "-t", e.T, "-o", f};
          if (converges(e)) cmd.insert(cmd.end(), {"--converge", fmt::format("{}", e.o.converge)});
          for (const auto& x : e.q()) cmd.push_back(x);
          GAMMA_RETURN_IF_ERROR(e.stage("learn at " + tag + " bpw -> " + f, learn_estimate(e), [&] { return run_step("learn", cmd); }));
        }
      }
      // Stage I's measured loss changes: on SmolLM2 (validation) they match HAWQ-V2 and beat
      // size-weighted log p by 1.8-3.8x in KLD (results/measure_smollm2.json). Raw, and fitted
      // per module as a line in rel_err (on Qwen's validation text the raw ones win at the
      // Q2_K size, the fitted ones at IQ3_M's: results/iq_qwen), so validation picks.
      out.push_back({s, {"--scores", f, "--transform", "delta"}});
      out.push_back({s + "-fit", {"--scores", f, "--transform", "delta-fit"}});
      out.push_back({s + "-cal", {"--scores", f, "--transform", "delta", "--layer-scale", lf}});
      gamma_file = f;
      // Stage I's activations are read by nothing after it (the emits and evaluations are
      // libllama's). Not while HAWQ-V2 is to come.
      const auto after = std::find(e.scorers.begin(), e.scorers.end(), s);
      if (std::find(after, e.scorers.end(), "hawq") == e.scorers.end()) GAMMA_RETURN_IF_ERROR(drop_activations(e));
    } else if (s == "static-cal") {
      // The static proxy rescaled layer by layer to the measured KLD: the measuring allocator
      // of the architectures without a LibTorch decoder (gamma layers runs through libllama).
      GAMMA_ASSIGN_OR_RETURN(std::string lf, measure_layers(e));
      out.push_back({s, {"--score-from-manifest", "--layer-scale", lf}});
    }
  }
  // Stage I's fitted deltas blended with HAWQ-V2's predictions (gamma solve --blend, the
  // geometric mean of the two costs): on Qwen, where the two tie alone (IQ3_XS and up), the
  // blend is below HAWQ-V2 in 6 of 12 test cells, GAMMA alone in 3 (results/iq_qwen/goal_table.md).
  if (!hawq_file.empty() && !gamma_file.empty())
    out.push_back({"gamma-blend", {"--scores", gamma_file, "--transform", "delta-fit", "--blend", hawq_file}});
  return out;
}

}  // namespace gm::run
