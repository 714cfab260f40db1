// gamma run --dry-run: the plan of work, each step's estimated time and disk (run/estimate.h),
// what is cached already, and the total; nothing is run.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "llama/backend.h"
#include "run/mixes.h"
#include "run/pipeline.h"
#include "solve/budget.h"

namespace fs = std::filesystem;

namespace gm::run {

using solve::format_size;

double pool_seconds(const Env& e, const Manifest& preview, const std::string& type) {
  double params = 0;
  for (const auto& m : preview.modules)
    if (m.find(type)) params += double(m.n_params);
  return pool_type_seconds(e.ms, type, params);
}

double pool_quantize_seconds(const Env& e, const Manifest& preview) {
  double s = 0;
  for (const auto& t : preview.types) s += pool_seconds(e, preview, t);
  return prunes(e) ? s * window_share(e.o.pool_window) : s;
}
double pool_window_bytes(const Env& e, const Manifest& preview) {
  double bytes = 0;
  for (const auto& m : preview.modules)
    for (const auto& c : m.candidates) bytes += double(c.bytes);
  return prunes(e) ? bytes * window_share(e.o.pool_window) : bytes;
}
// A streamed pool's candidates are made where they are first read and kept in POOL/stream/
// (pool/candidate.h), so the window is quantized once: gamma layers, which runs first, makes its
// low candidates (Q2_K), Stage I the rest of the window (it reads every candidate of it), and
// the emits make none of it.
static bool learn_makes_window(const Env& e) {
  return e.o.stream_pool && e.o.scores.empty() && std::find(e.scorers.begin(), e.scorers.end(), "gamma") != e.scorers.end();
}
double stream_layers_seconds(const Env& e) {
  return e.o.stream_pool ? pool_type_seconds(e.ms, "Q2_K", e.ms.linear_params) : 0;
}
double stream_learn_seconds(const Env& e) {
  return e.o.stream_pool ? std::max(0.0, e.pool_quantize_s - stream_layers_seconds(e)) : 0;
}
double stream_emit_seconds(const Env& e) {
  // Without Stage I: Qwen-1.5B at Q2_K's size (results/job_cost_qwen_q2k_stream/), the 18 raced
  // variants and the front made 772 of the window's 1,405 candidates (2.3 of its ~3.9 GB) in 585 s
  // of emits, 0.67x what quantizing the window took inside Stage I (~870 s: its 1,534 s less the
  // 664 s its steps took on the stored pool). Priced as 0.6 of the window.
  return e.o.stream_pool && !learn_makes_window(e) ? 0.6 * e.pool_quantize_s : 0;
}

double estimate_pool_seconds(const Env& e, const Manifest& preview, int64_t rows) {
  double s = 0;
  for (const auto& t : preview.types) {
    double params = 0;
    for (const auto& m : preview.modules)
      if (m.find(t)) params += double(std::min<int64_t>(rows, m.n_params / m.shape[0]) * m.shape[0]);
    s += pool_type_seconds(e.ms, t, params);
  }
  return s;
}

Status dry_run(Env& e, const Manifest& preview, const Range& range, int n_targets) {
  const auto& o = e.o;
  double total = 0;
  uint64_t disk = 0;
  auto line = [&](const std::string& what, bool cached, double s, uint64_t bytes) {
    std::printf("  %-44s %10s %12s\n", what.c_str(), cached ? "cached" : hms(s).c_str(),
                bytes ? format_size(bytes).substr(0, format_size(bytes).find(' ') + 4).c_str() : "");
    if (!cached) total += s, disk += bytes;
  };
  std::printf("gamma run --dry-run: %s (%.0fM weights, %.0fM in linear modules, %d layers), %d threads\n",
              fs::path(e.model).filename().c_str(), e.ms.params / 1e6, e.ms.linear_params / 1e6, e.ms.n_layer, e.ms.threads);
  if (const std::string n = llama::cpu_note(); !n.empty()) std::printf("note: %s\n", n.c_str());
  std::printf("files gamma can make from the pool (%s): %s to %s\n",
              e.o.types.empty() ? fmt::format("{} types", auto_types(e.o)).c_str() : "given types", format_size(range.min).c_str(), format_size(range.max).c_str());
  if (!o.sizes.empty()) {
    std::string sizes;
    for (const auto& s : o.sizes) sizes += (sizes.empty() ? "" : ",") + s;
    std::printf("target: --size %s\n", sizes.c_str());
  }
  else if (o.max_kld > 0) std::printf("target: --max-kld %g (bisection: about 8 probes, each every variant)\n", o.max_kld);
  else std::printf("target: --bpw %g of the linear modules (file size from the static plan)\n", o.bpw);
  std::printf("\n  %-44s %10s %12s\n", "step", "time", "disk");
  if (e.teacher == e.model) line("teacher: the model itself", true, 0, 0);
  else
    line(fmt::format("dequantize -> teacher ({})", o.teacher_type == "f16" ? "F16" : "F32"), file_exists(e.teacher),
         dequantize_seconds(e.ms), uint64_t((o.teacher_type == "f16" ? 2 : 4) * e.ms.params));
  if (o.imatrix == "auto")
    line(fmt::format("llama-imatrix ({} x {} tokens)", o.imatrix_chunks, o.eval_ctx), file_exists(e.imatrix),
         imatrix_seconds(e.ms, double(o.imatrix_chunks) * o.eval_ctx), 4 << 20);
  if (speed_budget(e))
    line("speed table (kernels per type and shape)", file_exists(e.W + "/speed.json"),
         speed_table_eta(e, preview), 0);
  // HAWQ-V2's and Stage I's activation caches, in gamma's cache (the disk column counts them).
  const uint64_t hawq_cache = uint64_t(activation_cache_bytes(e.ms, o.hawq_calib_tokens));
  const uint64_t learn_cache = learn_shares_hawq_activations(e) ? 0 : uint64_t(activation_cache_bytes(e.ms, o.calib_tokens));
  const bool pool_done = file_exists(e.pool + "/manifest.json");
  const bool pruned = prunes(e) && !pool_done;
  if (pruned) {
    line(fmt::format("estimate ({} rows per module)", o.estimate_rows), file_exists(e.W + "/estimate/manifest.json"),
         estimate_pool_seconds(e, preview, o.estimate_rows), 0);
    line("hawq traces (on the estimate)", file_exists(hawq_traces_path(e)),
         hawq_seconds(e.ms, o.hawq_samples, o.hawq_calib_tokens), hawq_cache);
  }
  const double share = pruned ? window_share(o.pool_window) : 1.0;
  // Its disk is POOL/stream/: with Stage I, the window less the source's own type (never kept);
  // without, emit's cache of the candidates the plans choose, about two plans' worth (the
  // variants overlap heavily), priced as two files of the middle size.
  if (o.stream_pool) {
    double made = 0;
    for (const auto& m : preview.modules)
      for (const auto& c : m.candidates)
        if (c.type != m.source_type) made += double(c.bytes);
    line("pool (streamed: the estimate's manifest, no files)", pool_done,
         share * estimate_pool_seconds(e, preview, o.estimate_rows),
         learn_makes_window(e) ? uint64_t(share * made) : range.max + range.min);
  }
  for (const auto& t : o.stream_pool ? std::vector<std::string>{} : preview.types) {
    uint64_t bytes = 0;
    for (const auto& m : preview.modules)
      if (auto* c = m.find(t)) bytes += c->file_bytes;
    line("pool " + t + (pruned ? " (window)" : ""), pool_done || file_exists(e.pool + "/cand-" + t + ".gguf"),
         share * pool_seconds(e, preview, t), uint64_t(share * double(bytes)));
  }
  for (const auto& s : e.scorers) {
    if (s == "hawq")
      line(prunes(e) ? "hawq (the estimate's traces)" : "hawq (HAWQ-V2 traces)", file_exists(e.W + "/scores-hawq.json"),
           prunes(e) ? hawq_rescore_seconds(e.ms, e.o.stream_pool) : hawq_seconds(e.ms, o.hawq_samples, o.hawq_calib_tokens),
           prunes(e) ? 0 : hawq_cache);
    // gamma layers before Stage I, as prepare_scorers runs them; once, for gamma and static-cal.
    const bool first_layers_user = (s == "gamma" || s == "static-cal") &&
                                   std::find_if(e.scorers.begin(), e.scorers.end(), [](const std::string& x) {
                                     return x == "gamma" || x == "static-cal";
                                   }) == std::find(e.scorers.begin(), e.scorers.end(), s);
    if (first_layers_user)
      line(fmt::format("layers ({} files, KLD each)", e.ms.n_layer + 1), file_exists(e.W + "/layers.json"), layers_estimate(e), 0);
    if (s == "gamma" && o.scores.empty())
      line(fmt::format("learn ({} steps)", learn_steps(e)), false, learn_estimate(e), learn_cache);
  }
  // + gamma-fit and gamma-cal, and gamma-blend with hawq
  const bool has_gamma = std::count(e.scorers.begin(), e.scorers.end(), "gamma") > 0;
  const bool has_hawq = std::count(e.scorers.begin(), e.scorers.end(), "hawq") > 0;
  const int n_scorers = int(e.scorers.size()) + (has_gamma ? 2 : 0) + (has_gamma && has_hawq ? 1 : 0);
  const int variants = n_scorers * (1 + kHeadSteps) * (o.max_kld > 0 ? 8 : n_targets);
  const double vtok = double(e.valid.front().chunks) * o.eval_ctx * double(e.valid.size());
  const double rtok = double(e.report.chunks) * o.eval_ctx;
  const double also_tok = rtok * double(e.also.size());  // the other report texts: each mix and gamma's file
  const uint64_t file = range.max / 2 + range.min / 2;
  const int per_size = n_scorers * (1 + kHeadSteps);
  // Every variant solved, emitted and measured once, on the race's chunks when raced; then the
  // race's best --race-keep of each size emitted and measured again on every validation chunk.
  const bool raced = !e.race.empty() && per_size > o.race_keep;
  const double first_tok = raced ? double(e.race.front().chunks) * o.eval_ctx * double(e.race.size()) : vtok;
  // --race-margin adds finalists: 4.1 and 4.8 of 18 at 3 % in the two Qwen runs (results/race/).
  const double finals = raced ? o.race_keep * (1 + 15 * o.race_margin) * (variants / per_size) : 0;
  // Mixes are built once whatever the number of sizes that compare with them, before gamma's
  // variants (run.cpp): the first one's evaluations pay the teacher's log-probs on the validation
  // and report texts.
  const int mixes = o.compare == "none" ? 0
                    : o.compare == "auto" ? std::min<int>((o.max_mixes + (o.mix_above ? 1 : 0)) * n_targets, int(standard_mixes().size()))
                                          : 1;
  const double teacher_tok = vtok + rtok + also_tok;
  line(fmt::format("up to {} llama.cpp mixes: quantize + {} evals", mixes, 2 + e.also.size()), false,
       mixes * (mix_seconds(e.ms, "IQ3_M") + eval_seconds(e.ms, teacher_tok, true)) +
           (mixes ? teacher_seconds(e.ms, teacher_tok) : 0),
       // one at a time: each is removed once measured, unless kept (--keep-mixes, or a budget that benches them)
       (o.keep_mixes || speed_budget(e) || memory_budget(e) ? mixes : std::min(mixes, 1)) * file);
  line(raced ? fmt::format("{} variants raced ({} chunk, best {} on all)", variants, e.race.front().chunks, o.race_keep)
             : fmt::format("{} variants: solve + emit + validation eval", variants),
       false,
       stream_emit_seconds(e) + variants * (emit_seconds(e.ms) + eval_seconds(e.ms, first_tok, true)) +
           finals * (emit_seconds(e.ms) + eval_seconds(e.ms, vtok, true)) +
           teacher_seconds(e.ms, (raced ? first_tok : 0) + (mixes ? 0 : vtok)),
       file);
  if (speed_budget(e))
    line(fmt::format("llama-bench of the reported files ({} rounds)", o.bench_rounds), false,
         bench_seconds(e.ms, n_targets + mixes, o.bench_rounds), 0);
  const int reported = o.front ? mixes + n_targets : n_targets;
  line(fmt::format("gamma at {} sizes on the report text", reported), false,
       reported * (emit_seconds(e.ms) + eval_seconds(e.ms, rtok, true)) + (mixes ? 0 : teacher_seconds(e.ms, rtok + also_tok)) +
           n_targets * eval_seconds(e.ms, also_tok, true),
       file);
  std::printf("\n  %-44s %10s %12s\n", "total (estimate, at this machine's speed)", hms(total).c_str(),
              format_size(disk).substr(0, format_size(disk).find(' ') + 4).c_str());
  return Status::ok();
}

}  // namespace gm::run
