// gamma run: the user's job end to end (src/run/run.h): a target (size, bpw or KLD), every
// allocator chosen on validation text, llama.cpp's mixes near the budget, the verdict and run.png.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "run/mixes.h"
#include "run/run.h"
#include "solve/budget.h"
#include "speed/speed.h"
#include "util/files.h"

namespace gm::cli {
namespace {

void add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto memory = std::make_shared<std::string>();  // --memory as given; parsed once into o->memory_bytes
  auto* c = app.add_subcommand("run", "the whole job: a file of a given size (or KLD), the best of gamma's allocators on validation text, beside llama.cpp's mixes (resumable)");
  c->add_option("model", o->model, "registry name (see gamma fetch) or a GGUF path")->capture_default_str();
  auto* size = c->add_option("--size", o->sizes, "target: the whole file, e.g. 880MiB, 1.2GB, 123456 (bytes), or a llama.cpp mix's name (Q3_K_M: the size of the file llama-quantize makes of this model with the run's imatrix); a comma list makes one file per size from the same pool and scores")
                   ->delimiter(',');
  auto* bpw = c->add_option("--bpw", o->bpw, "target: bits per weight of the linear modules (default 4.75 when no target is given)");
  auto* kld = c->add_option("--max-kld", o->max_kld, "target: the smallest file whose validation KLD vs the teacher is at most this");
  size->excludes(bpw)->excludes(kld);
  bpw->excludes(kld);
  c->add_option("-w,--work", o->work, "work directory (every step resumes from its files there)")->capture_default_str();
  c->add_option("--types", o->types, "pool candidate types (default: gamma pool's auto, the measured Pareto set)")
      ->delimiter(',');
  c->add_option("--scorers", o->scorers, "allocators tried on validation: static, hawq, gamma (comma list)")
      ->delimiter(',')->capture_default_str();
  c->add_option("--calib", o->calib, "calibration text of llama-imatrix, hawq and learn (default: WORK/calib.txt, the first 40,000 bytes of war-and-peace.txt and 36,000 of python-calib.txt)");
  c->add_option("--imatrix", o->imatrix, "auto (llama-imatrix on the calibration text), none, or an imatrix file")->capture_default_str();
  c->add_option("--imatrix-chunks", o->imatrix_chunks, "llama-imatrix chunks for --imatrix auto")->capture_default_str();
  c->add_option("--teacher-type", o->teacher_type,
                 "the teacher: the source dequantized to f16 (half the disk) or f32; auto: f16, or f32 where the "
                 "work directory already holds an F32 teacher")
      ->check(CLI::IsMember({"auto", "f32", "f16"}))
      ->capture_default_str();
  c->add_option("--scores", o->scores, "gamma scorer: reuse SCORES.json (learned at any budget) instead of learning");
  c->add_option("--steps", o->steps, "gamma learn steps (0: every layer visited once)")->capture_default_str();
  c->add_option("--visit-steps", o->visit_steps, "gamma learn steps per layer visit")->capture_default_str();
  c->add_option("--layers-per-step", o->layers_per_step, "gamma learn layers sampled per step (0: all)")->capture_default_str();
  c->add_option("--calib-tokens", o->calib_tokens, "gamma learn calibration tokens (when equal to --hawq-calib-tokens, as by default, Stage I reads HAWQ-V2's activations: one teacher forward)")->capture_default_str();
  c->add_option("--hawq-calib-tokens", o->hawq_calib_tokens, "gamma hawq calibration tokens")->capture_default_str();
  c->add_option("--layers-chunks", o->layers_chunks, "gamma layers: chunks of the calibration text (--ctx tokens each) each layer's file is measured on")->capture_default_str();
  c->add_option("--converge", o->converge, "gamma learn: end a layer's visit once its measured deltas are known to this relative standard error (0: the whole schedule)")->capture_default_str();
  c->add_option("--hawq-samples", o->hawq_samples, "gamma hawq Hutchinson probes per layer (the most, with --hawq-converge)")->capture_default_str();
  c->add_option("--hawq-converge", o->hawq_converge, "gamma hawq: end a layer's probes once every module's trace is known to this relative standard error (0: all --hawq-samples)")->capture_default_str();
  c->add_option("--compare", o->compare, "auto (llama.cpp's mixes that fit the budget and are near it), none, or one mix such as Q3_K_M")->capture_default_str();
  c->add_option("--max-mixes", o->max_mixes, "auto: the mixes of at most this many sizes inside the budget")->capture_default_str();
  c->add_flag("--mix-above", o->mix_above, "auto: also the smallest mix above the budget (and gamma's file at its size); it is built anyway when no mix fits");
  c->add_flag("--keep-mixes", o->keep_mixes, "keep each llama.cpp mix's GGUF in the work directory (default: removed once measured)");
  c->add_option("--pool-window", o->pool_window,
                "quantize, per module, only the candidates within this many steps of HAWQ-V2's plans on an estimate "
                "of the pool at every size the run makes (results/prune_qwen/); -1: every candidate")
      ->capture_default_str()->check(CLI::Range(-1, 100));
  c->add_option("--pool-window-iq2", o->pool_window_iq2,
                "with --pool-window: the IQ2 types (the slowest to quantize) only within this many steps below those "
                "plans (results/job_cost_qwen_iq2/); -1: as --pool-window")
      ->capture_default_str()->check(CLI::Range(-1, 100));
  c->add_flag("--stream-pool,!--stored-pool", o->stream_pool,
              "--stream-pool (the default): no candidate files; Stage I, gamma layers and each emit quantize the "
              "candidates they read from the source (the same bytes); the pool's errors are the estimate's. "
              "--stored-pool: every candidate quantized into the pool's files first (a work directory's existing "
              "pool is kept as it was made)");
  c->add_option("--estimate-rows", o->estimate_rows, "rows per module the estimate samples")
      ->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--text", o->eval_texts, "report texts, never used for choosing: wiki (wiki.test.raw, the default), python (python-eval.txt) or paths (comma list; the first draws the table and the picture, the others add gamma's and each mix's KLD on them)")
      ->delimiter(',');
  c->add_option("--valid-text", o->valid_texts, "texts that choose among plans and decide the verdict, their KLDs summed: wiki (wiki.valid.tokens, the default), python (python-calib.txt's held-back end) or paths (comma list)")
      ->delimiter(',');
  c->add_option("-c,--ctx", o->eval_ctx, "evaluation (and imatrix) chunk length")->capture_default_str();
  c->add_option("--chunks", o->eval_chunks, "report-text chunks")->capture_default_str();
  c->add_option("--valid-chunks", o->valid_chunks, "validation chunks (default: --chunks)");
  c->add_option("--race", o->race_chunks, "measure every variant on this many validation chunks first, then only the --race-keep best on all of them (0: every variant on all)")->capture_default_str();
  c->add_option("--race-keep", o->race_keep, "with --race: the variants measured on every validation chunk")->capture_default_str();
  c->add_option("--race-margin", o->race_margin,
                "with --race: also every variant whose race score is within this fraction of the --race-keep-th best's")
      ->capture_default_str()->check(CLI::Range(0.0, 10.0));
  c->add_flag("--each-scorer", o->each_scorer, "also report each other scorer's best variant on validation (static, HAWQ-V2, ...) on the report texts, beside gamma's file; the choice is unchanged");
  c->add_option("--min-decode", o->min_decode, "speed budget: the file must decode at least this many tokens/s on this machine (llama-bench tg128, as gamma speed predicts it), or a GGUF of the model: at least as fast as that file (e.g. the llama.cpp mix you run today), or a llama.cpp mix's name (Q4_0: as fast as that mix of this model, built from the teacher), or 'mix': at each --size named by a mix, as fast as that mix; a list (18,21,24) with one --size: a target per speed; needs --size")
      ->delimiter(',');
  c->add_option("--min-prefill", o->min_prefill, "speed budget: prompt processing tokens/s (llama-bench pp512), a GGUF of the model, a mix's name, or 'mix' (each size's); a list with one --size; needs --size")
      ->delimiter(',');
  c->add_option("--memory", *memory, "device budget: the memory llama.cpp may take to run the file (weights with their repacked copies, KV cache at --ctx, compute buffers), e.g. 2GiB; needs --size and --memory-ctx");
  c->add_option("--memory-ctx", o->ctx, "with --memory: the context the file must run with (tokens; -c/--ctx is the evaluation's chunk length)");
  c->add_option("--kv-type", o->kv_type, "with --memory: the KV cache's type (default f16)");
  c->add_option("--speed-retries", o->speed_retries, "with a speed budget: when gamma's file measures below it, solve again with the budget raised by the shortfall, at most this many times (0: only report it)")->capture_default_str();
  c->add_option("--bench-rounds", o->bench_rounds, "with a speed budget: llama-bench rounds over the reported files, each file's fastest kept")
      ->capture_default_str();
  c->add_flag("--no-front", [o](int64_t) { o->front = false; }, "skip gamma's plans at each mix's size (the picture's front)");
  c->add_flag("--dry-run", o->dry_run, "print the plan of work with its estimated time and disk, and stop");
  c->add_option("-t,--threads", o->threads, "threads (default: all cores)");
  c->add_flag("-q,--quiet", o->quiet, "no progress bars from the steps (also when stderr is not a terminal)");
  c->callback([o, memory, size, bpw, kld] {
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw Failure("cannot locate the gamma executable");
    o->gamma_exe = exe;
    if (o->llama_bin.empty()) {
      const char* env = std::getenv("GAMMA_LLAMA_BIN");
      o->llama_bin = env && *env ? env : exe_dir() + "/../bin";  // build/cli/gamma, build/bin/llama-*
    }
    if (size->count() + bpw->count() + kld->count() == 0) o->bpw = 4.75;
    if (bpw->count()) fail_if(solve::check_bpw(o->bpw));
    if (kld->count() && !(o->max_kld > 0 && std::isfinite(o->max_kld))) throw Failure("--max-kld must be a positive number");
    // A llama.cpp mix's name is resolved inside the run (the mix is built from the teacher first).
    for (auto [arg, name] : {std::pair{&o->min_decode, "--min-decode"}, std::pair{&o->min_prefill, "--min-prefill"}}) {
      const auto& list = *arg;
      if (list.size() > 1 && o->sizes.size() != 1)
        throw Failure(fmt::format("{}: a list of speeds goes with one --size (a target per speed at that size)", name));
      for (const auto& a : list) {
        if (a.empty()) throw Failure(fmt::format("{} {}: an empty speed in the list", name, fmt::join(list, ",")));
        if (!run::mix_size_name(a).empty()) continue;
        if (a != RunOptions::kSizeMix) {
          fail_if(speed::check_speed_target(a).with_context(name));
          continue;
        }
        if (list.size() > 1) throw Failure(fmt::format("{} mix: not in a list (it is already one speed per --size)", name));
        for (const auto& s : o->sizes)
          if (run::mix_size_name(s).empty())
            throw Failure(fmt::format("{} mix: every --size must be a llama.cpp mix's name (--size {} is not)", name, s));
      }
    }
    if (o->min_decode.size() > 1 && o->min_prefill.size() > 1)
      throw Failure("--min-decode and --min-prefill: a list in one of them, not both");
    if ((!o->min_decode.empty() || !o->min_prefill.empty()) && !size->count())
      throw Failure("--min-decode and --min-prefill need --size: the speed budget is solved beside a file size");
    if (o->bench_rounds < 1) throw Failure("--bench-rounds must be positive");
    if (o->speed_retries < 0) throw Failure("--speed-retries must be 0 or more");
    if (!memory->empty() != (o->ctx > 0))
      throw Failure("--memory and --memory-ctx go together: the memory holds the weights and the KV cache of that many tokens");
    if (!memory->empty()) {
      if (!size->count()) throw Failure("--memory needs --size: the memory budget is solved beside a file size");
      auto m = solve::parse_size(*memory);
      if (!m.is_ok()) fail_if(m.status().with_context("--memory"));
      o->memory_bytes = *m;
    }
    if (!(o->converge >= 0 && o->converge < 1)) throw Failure("--converge must be in [0, 1)");
    if (!(o->hawq_converge >= 0 && o->hawq_converge < 1)) throw Failure("--hawq-converge must be in [0, 1)");
    if (o->calib_tokens < 1 || o->hawq_calib_tokens < 1 || o->layers_chunks < 1)
      throw Failure("--calib-tokens, --hawq-calib-tokens and --layers-chunks must be positive");
    if (o->eval_chunks < 1 || o->eval_ctx < 8 || o->imatrix_chunks < 1 || o->steps < 0 || o->visit_steps < 1 || o->valid_chunks < 0 || o->max_mixes < 1 || o->race_chunks < 0 || o->race_keep < 1)
      throw Failure("--chunks, --ctx, --imatrix-chunks, --visit-steps and --max-mixes must be positive (--steps >= 0)");
    fail_if(run_pipeline(*o));
  });
}

}  // namespace
GAMMA_COMMAND(5, add_run);
}  // namespace gm::cli
