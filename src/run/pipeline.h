// The pieces of `gamma run` (run.h), shared by its files; one concern per file:
//   env.cpp       the run's resolved inputs, its stage log, evaluations on validation and report text
//   target.cpp    the feasible range, the head rules, the budget as a file size
//   scorers.cpp   every scorer's scores, measured once (static, HAWQ-V2, Stage I, gamma layers)
//   variants.cpp  every scorer x head at one size, chosen on validation; --max-kld's bisection
//   mixes.cpp     llama.cpp's standard mixes: predicted, chosen for a budget, built, measured
//   summary.cpp   run.json, the table, the verdict, run.png
//   prune.cpp     the pool's candidates chosen from an estimate (HAWQ-V2 on sampled rows)
//   speed_budget.cpp  --min-decode / --min-prefill: the speed table, the head rules that meet
//                 it, each reported file measured by llama-bench
//   dry_run.cpp   the plan of work with its estimated time and disk
//   machine.cpp   this machine's speed against the reference the estimates are priced on
//   run.cpp       the steps in order
// Internal to src/run: nothing outside includes it.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eval/result.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "run/estimate.h"
#include "run/run.h"
#include "solve/allocate.h"
#include "speed/speed.h"
#include "util/files.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::run {

// "42s", "3m07s", "2h05m".
std::string hms(double seconds);

// ---- env.cpp ---------------------------------------------------------------------------------

// A text files are measured on: validation texts choose, the report text is only reported.
struct EvalText {
  std::string path;
  int chunks = 0;
  bool validation = false;
};

// The run's inputs, resolved once: paths in the work directory, the child commands'
// common arguments, the model's size (for estimates) and the stage log.
struct Env {
  explicit Env(const RunOptions& opt) : o(opt), cache_start(dir_bytes(cache_dir())) {}
  const RunOptions& o;
  std::string G, T, W, data, model, teacher, imatrix, pool, calib;
  // --scorers less those the model's architecture has no LibTorch decoder for (hawq, gamma).
  std::vector<std::string> scorers;
  std::vector<EvalText> valid;  // a file's validation score is the sum of its KLDs on these
  std::vector<EvalText> race;   // the same texts at --race chunks (empty: no race)
  EvalText report;
  std::vector<EvalText> also;  // the other report texts (--text's others)
  ModelSize ms;
  std::string arch;  // the source's architecture
  bool quiet = false;  // pass -q to the steps (not a terminal, or --quiet)
  std::optional<FileLock> lock;  // on the work directory, for the whole run
  std::string speed;                       // W/speed.json with a speed budget, else ""
  std::optional<speed::CostTable> table;   // its contents
  // The target's speed budgets, tokens/s by the table (0: none), and the file each says "as fast
  // as" ("" for a number): the report measures that file beside gamma's, in the same rounds.
  struct SpeedBudgets {
    double decode_tps = 0, prefill_tps = 0;
    std::string decode_file, prefill_file;
    // What llama-bench measured for the files in the report's rounds (0: not measured).
    double decode_file_measured = 0, prefill_file_measured = 0;
  };
  SpeedBudgets budget;
  // Per target (target_count) when the budgets differ between targets (a list of speeds at one
  // size, or "mix": each size's own), else empty: `budget` holds for all.
  std::vector<SpeedBudgets> target_speeds;
  // The budgets at the i-th target.
  void speed_at(size_t i) {
    if (i < target_speeds.size()) budget = target_speeds[i];
  }
  std::string memory_source;                       // W/memory-source-*.json: the source's allocation, measured once
  std::optional<speed::MemoryUse> source_memory;   // llama.cpp's allocation for the source at --ctx
  // Quantizing the pool's candidates once (its window when pruned), estimated: the pool stage's
  // time, or with --stream-pool what Stage I, gamma layers and the emits take on instead.
  double pool_quantize_s = 0;
  double pool_window_bytes = 0;  // the bytes of those candidates
  std::string machine;  // this machine's speed file in gamma's cache (calibrate_machine), "" if none
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  json stages = json::array();
  // The disk the run takes: its work directory plus what it added to gamma's cache (the fetched
  // model, activation caches, the teacher's logits), at most: sampled every 5 s while each stage
  // of this invocation runs (gamma layers' per-layer files are gone by its end) and at its end.
  uint64_t cache_start = 0;
  uint64_t peak_disk = 0;

  double elapsed() const;
  // One line per stage: its name and estimated time, then its wall time once done.
  Status stage(const std::string& name, double eta, const std::function<Status()>& fn);
  std::vector<std::string> q() const { return quiet ? std::vector<std::string>{"-q"} : std::vector<std::string>{}; }
  // Which text and chunks a measurement is on: "valid-wiki.valid-c512-n8". It names the
  // teacher's base file and every eval result, so a run with another text never reuses one.
  std::string eval_tag(const EvalText& t) const;
  std::string kld_base(const EvalText& t) const { return W + "/teacher-" + eval_tag(t) + ".kld"; }
  // Removes the teacher's log-probs on `texts` once no later step reads them: on Qwen-1.5B they
  // are 0.62 GB per 8 x 512 tokens (its vocabulary of 151,936 at 2 bytes a token), and a later
  // run that needs them again writes them from the teacher (one evaluation's time).
  void drop_kld_bases(const std::vector<EvalText>& texts) const;
  std::string eval_path(const std::string& stem, const EvalText& t) const { return stem + "." + eval_tag(t) + ".json"; }
  // The validation texts' paths, comma-separated (run.json's validation text).
  std::string valid_paths() const;
};

// An eval result with the figures run compares by (size, KLD, top-1, PPL); a file without
// them is corrupt here.
Result<eval::EvalResult> load_eval(const std::string& path);
// gamma eval of `gguf` against the teacher on `t`, into STEM.<eval_tag>.json (reused when there).
Result<eval::EvalResult> eval_file(Env& e, const std::string& gguf, const std::string& stem, const EvalText& t);
// eval_file on each of Env::also's texts, in order (a row's figures on the other report texts).
Result<std::vector<eval::EvalResult>> eval_also(Env& e, const std::string& gguf, const std::string& stem);

// A file's validation score: the sum of its mean KLDs over the validation texts, the error of
// the sum (the texts' errors in quadrature), and its size.
struct ValidScore {
  double kld = 0, err = 0;
  uint64_t file_bytes = 0;
};
// Whether every eval of STEM on `texts` (the validation texts, or the race's) is cached (then
// `gguf` need not exist).
bool validated(const Env& e, const std::string& stem, const std::vector<EvalText>& texts);
// `from`'s evals on `texts` copied to `to` where `to` lacks them: the two stems are the same
// tensors (plan_key), so what was measured of one is what the other would measure.
Status adopt_measurements(const Env& e, const std::string& from, const std::string& to, const std::vector<EvalText>& texts);
Status copy_file(const std::string& from, const std::string& to);
bool validated(const Env& e, const std::string& stem);
Result<ValidScore> validate(Env& e, const std::string& gguf, const std::string& stem, const std::vector<EvalText>& texts);
Result<ValidScore> validate(Env& e, const std::string& gguf, const std::string& stem);

// One row of the report table: `ev` passed load_eval.
json report_row(const std::string& label, const std::string& path, const eval::EvalResult& ev, double valid_kld);

// ---- target.cpp ------------------------------------------------------------------------------

struct Range {
  uint64_t min = 0, max = 0;  // the smallest file run can make, and the largest one
};
constexpr int kHeadSteps = 2;  // the cheaper heads variants_at tries: 1 .. kHeadSteps steps

Result<ModelSize> model_size(const std::string& path, int threads);
// Smallest: every module at its lightest candidate, the head at the cheaper of the types run
// tries. Largest: every module at its heaviest candidate.
Result<Range> feasible_range(const Manifest& man);
// The head a rule gives at `size` bytes: "" (the default for that size, `steps` 0) or the type
// `steps` steps cheaper than that default; nullopt when the rule cannot make a file that small.
Result<std::optional<std::string>> head_at(const Manifest& man, const solve::Allocator& stat, uint64_t size, int steps);
// The budget as a file size (--bpw: the static plan's file at that linear bpw; --max-kld: 0,
// none yet) for a --size of `size_target` bytes (0: none).
Result<uint64_t> budget_bytes(const RunOptions& o, const solve::Allocator& stat, uint64_t size_target);
// The linear bpw GAMMA learns at: --bpw, else the static plan's at `budget` (0: the middle of
// the feasible range).
Result<double> learn_bpw(const RunOptions& o, const solve::Allocator& stat, uint64_t budget, const Range& range);

// ---- scorers.cpp -----------------------------------------------------------------------------

// W/activations-before.json: the calibration activation entries of gamma's cache (decoder/
// activations.h) that were there when the job first started.
std::string activations_before_path(const Env& e);
// HAWQ-V2 and Stage I read the teacher's activations on the calibration text (1.09 GB of gamma's
// cache on Qwen-1.5B); nothing after the scorers does. Once they are ready (Stage I's already when
// it is done, before `gamma layers`), the entries their scores files name are dropped, unless they were there before the job (another run's); a later
// job on the same calibration builds them again (a teacher forward pass: minutes on Qwen-1.5B).
Status drop_activations(Env& e);

struct Scorer {
  std::string name;               // static, hawq, gamma, gamma-fit, gamma-cal, gamma-blend
  std::vector<std::string> args;  // gamma solve's score arguments
};
// The scorers the architecture allows (Env::scorers); a skipped one is said in one line.
void choose_scorers(Env& e, const std::string& arch);
int learn_steps(const Env& e);
double learn_estimate(const Env& e);
// Stage I reads the activation entry HAWQ-V2 made (HAWQ-V2 among the scorers, as many tokens of
// the same text in sequences of the same length): its teacher forward is paid once.
bool learn_shares_hawq_activations(const Env& e);
// The calibration sequences' length for HAWQ-V2 and Stage I alike (one activation entry).
constexpr int kCalibSeqLen = 256;
double layers_estimate(const Env& e);
// The scores of every scorer asked for, measured once (cached in the work directory); GAMMA
// learns at `learn_bpw` (its scores are reused at every other budget).
Result<std::vector<Scorer>> prepare_scorers(Env& e, double learn_bpw);

// ---- variants.cpp ----------------------------------------------------------------------------

struct Variant {
  std::string name, scorer, head_type;  // head_type "" = the default for the size
  std::vector<std::string> scorer_args;  // the scorer's gamma solve arguments (Scorer::args)
  int head_steps = 0;                    // how many steps cheaper than that default head_type is
  std::string plan;
  uint64_t bytes = 0;
  double kld = 0, kld_err = 0;  // validation (finalists only)
  double race_kld = 0;          // the race's score (the first --race chunks), when raced
  bool finalist = true;         // measured on every validation chunk (false: out in the race)
  json speed;                   // the plan's predicted tok/s (plan.info["speed"]), or null
  std::string same_as;          // an earlier variant at this size with the same plan (its measurements serve)
};
// What a plan puts in its file: each module's candidate and the fixed tensors' types. Two plans
// with the same key emit the same tensors (emit is deterministic, Emit.SamePlanSolvedTwiceGivesTheSameBytes;
// only the plan's hash in the metadata differs, not the file's size), so one measurement serves both.
std::string plan_key(const Plan& p);
// Every scorer with the default head and a cheaper head (one and two steps) at `size` bytes,
// named, with their plans' paths (W/at-SIZE/plan-NAME.json); nothing solved.
Result<std::vector<Variant>> variant_list(Env& e, const Manifest& man, const solve::Allocator& stat,
                                          const std::vector<Scorer>& scorers, uint64_t size);
// `gamma solve` of one variant at `size` bytes (and the speed budgets in force) into its plan.
Status solve_variant(const Env& e, const Manifest& man, const Variant& v, uint64_t size);
// The variants of variant_list: solved, emitted, measured on validation text (raced first with Env::race: every variant on
// its chunks, the best --race-keep then on all). Files live in W/at-SIZE/; the candidate GGUFs
// are removed once measured.
Result<std::vector<Variant>> variants_at(Env& e, const Manifest& man, const solve::Allocator& stat,
                                         const std::vector<Scorer>& scorers, uint64_t size);
// Where a variant's files live: W/at-SIZE/NAME (+ .gguf, + .<eval tag>.json).
std::string variant_stem(const Variant& v);
// The one rule that chooses: the least validation score among the finalists.
const Variant& best_of(const std::vector<Variant>& vs);
// The scorer family a variant belongs to: its scorer, with GAMMA's transforms and blend (gamma-*)
// under "gamma".
std::string scorer_family(const Variant& v);
// --each-scorer: every other family's best variant by the same rule as best_of, among its own
// variants; a family the race left without a finalist has its race-best measured on every
// validation chunk first (so every figure compared is a full validation's).
Result<std::vector<Variant>> family_bests(Env& e, const std::vector<Variant>& vs, const Variant& best);
json variant_json(const Variant& v);
// Emits `v`'s plan to `gguf` unless it is there already.
Status emit_variant(Env& e, const Variant& v, const std::string& gguf);
// --max-kld: the smallest size whose best variant's validation KLD is at most X (bisection);
// every probe is recorded in `probes`.
Result<uint64_t> search_max_kld(Env& e, const Manifest& man, const solve::Allocator& stat,
                                const std::vector<Scorer>& scorers, const Range& range, json& probes);

// ---- mixes.cpp (with mixes.h) ----------------------------------------------------------------

struct MixRow {
  std::string name, path;
  uint64_t bytes = 0, predicted = 0;
  double valid_kld = 0, valid_err = 0;
  eval::EvalResult report;
  std::vector<eval::EvalResult> also;  // on Env::also's texts
  bool fits = false;
};
std::vector<std::string> quantize_cmd(const Env& e, const std::string& mix, const std::string& out);
// W/llama-MIX.gguf, quantized from the teacher with the imatrix unless it is there already.
Result<std::string> build_mix(Env& e, const std::string& mix);
// The predicted file sizes of the mixes compared_mixes builds for `budget` (none with --compare none).
Result<std::vector<uint64_t>> compared_mix_sizes(Env& e, uint64_t budget);
// llama-quantize's prediction of the mix's file from the run's teacher and imatrix (both made);
// an error when it cannot make it here (an IQ1/IQ2 mix under --imatrix none).
Result<uint64_t> predicted_mix_size(Env& e, const std::string& mix);
// llama.cpp's mixes near the budget (or the one asked for), built and measured on the same chunks.
Result<std::vector<MixRow>> compared_mixes(Env& e, uint64_t budget);

// ---- prune.cpp -------------------------------------------------------------------------------

// Whether the pool's candidates are chosen from an estimate (RunOptions::pool_window).
bool prunes(const Env& e);
// The pool's quantizing, estimated (Env::pool_quantize_s), and what a streamed pool's readers
// add to their own stages: Stage I the window once, and three times again what its candidate
// store cannot keep in memory (pool/candidate.h: four passes over the layers), gamma layers every
// layer at Q2_K, the emits each distinct choice once (measured: about 0.6 of the window).
double pool_quantize_seconds(const Env& e, const Manifest& preview);
double pool_window_bytes(const Env& e, const Manifest& preview);
double stream_learn_seconds(const Env& e);
double stream_layers_seconds(const Env& e);
double stream_emit_seconds(const Env& e);
// Once the scorers are ready: a streamed pool's made candidates (POOL/stream/, Stage I leaves the
// whole window there) cut back to those that some variant's plan takes at the run's target sizes
// (and, with the front, its mixes' sizes), each variant solved where variants_at will solve it.
// The window is what plans near the targets *can* take; the emits read only what they *do* take
// (on Qwen-1.5B at Q2_K's size 772 of 1,405 candidates). Once per work directory
// (W/stream-kept.json); --max-kld (its sizes are found later) keeps everything, and so does any
// plan that cannot be solved here (said in one line): a removed candidate is only made again.
Status keep_made_for_plans(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                           const std::vector<uint64_t>& target_sizes);
// HAWQ-V2's scores on the estimate: their traces serve the real pool's scores (--traces-from).
std::string hawq_traces_path(const Env& e);
std::vector<std::string> hawq_cmd(const Env& e, const std::string& pool, const std::string& out);
// The estimate, HAWQ-V2's traces on it, and the candidates of the real pool for targets `sizes`
// (bytes; 0: --bpw's): W/pool-only.json, for gamma pool --only (made once).
Result<std::string> pool_only(Env& e, const Manifest& preview, const std::vector<uint64_t>& sizes);

// ---- summary.cpp -----------------------------------------------------------------------------

// The report text: gamma's file, each mix, and gamma's chosen variant at each mix's size (the
// front), with everything the run decided: run.json's body.
Result<json> summarize(Env& e, const Manifest& man, const std::vector<Scorer>& scorers, const solve::Allocator& stat,
                       const std::vector<Variant>& vs, const Variant& best, const std::string& out, uint64_t budget,
                       const std::string& size_text, const Range& range, const json& probes,
                       const std::vector<MixRow>& mixes, const std::vector<Variant>& families);
Status draw_run_png(const std::string& path, const json& summary);
// The table (report text), the verdict in words and where everything is.
void print_summary(const Env& e, const json& summary, const std::string& json_path, const std::string& png_path);
// Several sizes: one line each (chosen variant, its validation and report KLD, the verdict),
// then the goal table (`table`: sweep_table_md's, as written to W/sweep.md).
void print_sweep(const Env& e, const json& sweep, const std::string& table);
// sweep.png under speed budgets: KLD against measured decode speed, gamma's file at each target
// (a line per size: the speed/quality front), the mixes as points. Nothing without them.
Status draw_sweep_png(const std::string& path, const json& sweep);

// ---- sweep_table.cpp -------------------------------------------------------------------------

// The sweep's goal table in Markdown (W/sweep.md): per size gamma's file, every other scorer's
// best (--each-scorer) and the size's llama.cpp mix on each report text, whether gamma's file is
// below all of them on every text (by the paired errors), the speeds under a budget; then the
// paired differences.
std::string sweep_table_md(const json& sweep);

// ---- speed_budget.cpp ------------------------------------------------------------------------

// Whether --min-decode or --min-prefill is set; whether --memory is.
bool speed_budget(const Env& e);
// The pool's types when none are given: auto, or under a speed budget auto-speed (pool.h).
const char* auto_types(const RunOptions& o);
bool memory_budget(const Env& e);
// --memory: llama.cpp's allocation for the source at --ctx (speed/memory.h), into e.
Status measure_memory(Env& e);
// This machine's speed against the reference the estimates are priced on (machine.cpp): sets
// e.ms's quantize_scale and forward_scale from two short probes, measured once per model, CPU
// and thread count and kept in gamma's cache; prints one line.
Status calibrate_machine(Env& e, const Manifest& preview);
// A finished stage's time against its estimate, kept in that file: the next run of this model
// on this machine prices each kind of work (quantizing, ggml's and LibTorch's passes) by what
// its stages took here, the probes standing in for a kind no stage has measured yet. A stage
// run beside other jobs (shared_machine) is not kept: one such stage had doubled the price of
// every evaluation (results/job_cost_qwen_q2k).
void record_stage(const Env& e, const std::string& name, double estimate_s, double seconds, double other_cores);
// Whether other jobs took more of the cores during a stage (`other_cores`, cores' worth on
// average; < 0 unknown) than this run leaves idle, by a quarter of a core.
bool shared_machine(const Env& e, double other_cores);

// The speed table of `m`'s candidates on this machine, W/speed.json (kept; a second run and
// gamma speed's own cache measure nothing), into e.speed and e.table. Made from the pool's
// preview, before any candidate is quantized.
Status make_speed_table(Env& e, const Manifest& m);
// Its estimated time (the dry run's and the stage's): m's types, llama-bench of e.model.
double speed_table_eta(const Env& e, const Manifest& m);
// --min-decode / --min-prefill as tokens/s by the table (Env::budget, per target Env::target_speeds).
// A mix's name needs that mix's file, built from the teacher and imatrix: so unless `teacher_made`
// such a target is left unresolved (returns false).
Result<bool> resolve_speed_targets(Env& e, const Manifest& m, bool teacher_made);
// The speeds a file must measure: a budget given as a file is what llama-bench measured for that
// file in the report's rounds (the table's bias is on neither side), else the number given.
double measured_decode_budget(const Env& e);
double measured_prefill_budget(const Env& e);
// After gamma's file (its report row) measured below a speed budget: raises Env::budget by the
// shortfall the table did not see; false when nothing is to raise.
bool raise_by_shortfall(Env& e, const json& gamma_row);
// The speed and memory budgets as a name part ("" without them, else e.g. "-tg27.4-mem2147483648c8192"):
// the files solved at a size under one budget are never taken for another's on a rerun.
std::string budgets_tag(const Env& e);
// gamma solve's arguments of the speed and memory budgets (none without them).
std::vector<std::string> speed_args(const Env& e);
// The speed and memory budgets of the current target (Env::budget) as the solver takes them.
solve::SpeedBudget solve_limits(const Env& e);
// A head rule: the head's type ("" = the default at the size) and its steps below the default.
using HeadRule = std::pair<std::string, int>;
// The rules among `rules` that some plan of `size` bytes meets the speed and memory budgets with
// (all of them without one); none fails naming the fastest speed (or least memory) reachable.
Result<std::vector<HeadRule>> meeting_speed(const Env& e, const Manifest& man, uint64_t size,
                                            const std::vector<HeadRule>& rules);
// Every head rule at `size` (head_at for 0 .. kHeadSteps steps) that the speed budget allows.
Result<std::vector<HeadRule>> head_rules(const Env& e, const Manifest& man, const solve::Allocator& stat, uint64_t size);
// Each row of `summary` whose file is on disk measured by llama-bench beside its prediction
// (gamma speed --bench, W/speed-check-BUDGET.json): row keys predicted_tg128/pp512 (by the speed
// table, each file's types it lacks timed into it first: `man`'s model), tg128, pp512; with
// --memory, its memory as llama.cpp allocates it at --ctx (row key memory).
Status bench_rows(Env& e, const Manifest& man, json& summary, uint64_t budget);

// ---- dry_run.cpp -----------------------------------------------------------------------------

// The estimated pool time of `type`: over the weights of the modules that take it.
double pool_seconds(const Env& e, const Manifest& preview, const std::string& type);
// The estimate's seconds: every type on `rows` rows of each module.
double estimate_pool_seconds(const Env& e, const Manifest& preview, int64_t rows);
Status dry_run(Env& e, const Manifest& preview, const Range& range, int n_targets);

}  // namespace gm::run
