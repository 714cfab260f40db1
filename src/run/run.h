// `gamma run`: the user's job on one model, as a chain of gamma's own commands (each a child
// process, so every stage prints and fails exactly as when run alone) and llama.cpp's tools:
//   fetch -> dequantize (the F32 teacher) -> llama-imatrix -> pool
//   -> the scores of every scorer asked for (static proxy, HAWQ-V2 traces, GAMMA's Stage I),
//      each measured once and cached in the work directory
//   -> the target as a file size: --size as given (several: each in turn), --bpw through the
//      static plan's size, or --max-kld by bisection over sizes (each probe the step below)
//   -> llama.cpp's standard mixes that fit the budget and are near it (llama-quantize
//      --dry-run predicts each size; the chosen ones are built from the same teacher and
//      imatrix, measured on the validation and report texts, and removed)
//   -> at that size, every scorer with the default output head and one and two steps cheaper: solve,
//      emit, KLD vs the teacher on the validation texts; the lowest sum becomes gamma's file;
//      a mix that fits and beats it on the same chunks is the verdict, said plainly with its
//      llama-quantize command
//   -> gamma's chosen variant at each mix's size (its front), everything on the report text
//   -> run.json, the table, run.png (several sizes: run-BYTES.json and .png each, sweep.json).
// Every step leaves its output in the work directory and is skipped when that output exists
// (pool, hawq and learn also resume mid-way), so an interrupted run continues where it stopped.
#pragma once
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct RunOptions {
  std::string model = "smollm2-135m";  // registry name (gamma fetch) or a GGUF path
  // The target: exactly one of file sizes ("880MiB", "1.2GB", bytes; several make one file
  // each, from the same pool and scores), bits per weight of the linear modules, or the largest
  // validation KLD allowed (the smallest file that meets it).
  std::vector<std::string> sizes;
  double bpw = 0;
  double max_kld = 0;
  std::string work = "gamma-run";      // work directory
  std::vector<std::string> types;      // pool candidates; empty: gamma pool's default set (auto)
  // Every scorer by default: validation picks. "gamma" tries Stage I's measured loss changes raw,
  // fitted in rel_err, and rescaled to each layer's measured KLD (gamma layers; on Qwen the best
  // allocator from IQ2_M to 3.0 bpw, tied with HAWQ-V2 from IQ3_XS up: results/iq_qwen/table.md).
  // Stage I costs ~2 min on SmolLM2 and ~30 min on Qwen-1.5B, the layer measurement ~13 min
  // there (2 cores), cached in the work directory like HAWQ-V2's traces.
  std::vector<std::string> scorers = {"static", "hawq", "gamma"};
  std::string calib;                   // calibration text of imatrix, hawq and learn; default prose + code (run.cpp)
  std::string imatrix = "auto";        // auto (llama-imatrix on the calibration text), none, or a file
  int imatrix_chunks = 32;
  // The teacher's type: f32 (the source's dequantization exactly) or f16 (half the disk; on
  // SmolLM2 its KLD against the F32 teacher is 4e-6, wiki.test 8 x 512; on Qwen-1.5B at Q2_K's
  // size the job chose the same tensor bytes as with F32, results/job_cost_qwen_q2k_stream/).
  // auto: f16, or f32 in a work directory an earlier run gave an F32 teacher (it resumes on
  // that one). A model already of this type or wider is its own teacher.
  std::string teacher_type = "auto";
  std::string scores;                  // gamma scorer: reuse a SCORES.json instead of learning
  // gamma learn's recipe (measured on SmolLM2, results/measure_smollm2.json): hard samples,
  // sub-layer forcing, each layer visited for visit_steps steps, every 2nd step measuring each
  // candidate's loss change, solved on it (--transform delta); the layer loss clipped
  // (--layer-loss clip: on Qwen one token holds ~98 % of the hidden states' energy, and plain
  // MSE measures mostly that token). steps 0: 1 + n_layer x
  // visit_steps / layers_per_step (every layer visited once).
  // calib_tokens = hawq_calib_tokens: Stage I reads the very activation entry HAWQ-V2's traces
  // made (one teacher forward, not two; ~3 min of LibTorch on Qwen-1.5B, 2 cores). A visit
  // ended by --converge 0.2 reads about 5 steps x 2 x 256 tokens of them, and the measured
  // deltas settle on ~1,024 tokens per layer (issue 19); 8,192 until issue 44.
  int steps = 0, layers_per_step = 1, visit_steps = 16, calib_tokens = 4096;
  // gamma learn --converge: a layer's visit ends once its measured deltas are known to this
  // relative standard error (results/converge_smollm2/: at 0.2, 30 % of the steps and the same
  // plans but 2 modules of 210); 0: every step of the schedule.
  double converge = 0.2;
  int hawq_samples = 4, hawq_calib_tokens = 4096;
  // gamma layers: each layer's file measured on this many chunks (eval_ctx tokens each) of the
  // calibration text. 552 s of the 880MiB Qwen-1.5B job's 3,159; on 2 chunks 212 s against 365
  // alone, with a plan no worse (results/job_cost_qwen_iq2/layers-chunks2/).
  int layers_chunks = 4;
  // gamma hawq --converge: a layer's Hutchinson probes end once every module's trace is known to
  // this relative standard error (from the 3rd probe on); 0: all hawq_samples. 0 by default: at 4
  // probes it saved no time on SmolLM2 and chose the same plan (results/hawq_converge_smollm2/).
  double hawq_converge = 0;
  // The pool's candidates chosen from an estimate (run/prune.cpp): per module, those within
  // this many steps of HAWQ-V2's plans on the estimate at every size the run makes; -1: every
  // candidate. Only with the auto types, HAWQ-V2 among the scorers and --size or --bpw.
  int pool_window = 3;
  // The IQ2 types (the slowest to quantize: 368-995 s per 1e9 weights against Q2_K's 269) only
  // within this many steps below those plans (solve/window.h, results/job_cost_qwen_iq2/); -1: as any
  // other type, pool_window.
  int pool_window_iq2 = 1;
  // The pool streamed (gamma pool --stream): the estimate's manifest restricted to the window,
  // no candidate files; Stage I, gamma layers and each emit quantize what they read from the
  // source (the same bytes), so the pool's disk is gone and its quantizing moves into them. The
  // default (issue 44): on Qwen-1.5B, with the F16 teacher, 1 h 17 min and 10.6 GB at Q2_K's size
  // against the stored pool's 1 h 37 min and 16.0 GB, the same file (docs/scale.md). false
  // (--stored-pool): every candidate quantized once into POOL/*.gguf, the errors the full
  // tensors'. A work directory whose pool exists keeps it as it was made.
  bool stream_pool = true;
  int estimate_rows = 128;             // rows per module the estimate samples
  std::string compare = "auto";        // auto (the mixes near the budget), none, or one mix name
  // auto: the mixes of at most this many sizes inside the budget, the largest first (and the
  // nearest above with mix_above). 1: in every run that measured more (Qwen at 880MiB, SmolLM2 at Q3_K_M's size
  // on both teachers, Gemma-3-270M at three sizes, docs/design.md) the mix that fits and scores
  // best on validation was the largest one that fits, or one of its size; each further mix costs
  // a llama-quantize and two evaluations (4.5 min for IQ2_M on Qwen-1.5B, 2 cores) and widens the
  // pool's window by another size.
  int max_mixes = 1;
  // Also the smallest mix above the budget (--mix-above; it stands in anyway when no mix fits):
  // what the next mix up costs and gives, and gamma's file at its size. Off by default (issue
  // 44: build only the mixes that fit): on Qwen-1.5B at 880MiB it was Q3_K_M, a llama-quantize,
  // three evaluations and another window size, about 160 s of the 65 min job
  // (results/job_cost_qwen_880_m167/), and the verdict never reads it.
  bool mix_above = false;
  // Keep each mix's GGUF after its evaluations (by default it is removed then: its figures are
  // what the run needs, the verdict prints the llama-quantize command that makes it, and on
  // Qwen-1.5B three mixes are 3.3 GB of the job's disk). Kept anyway under a speed or memory
  // budget, which measure the files.
  bool keep_mixes = false;
  // The report texts (test_text_path: wiki, python or paths; default wiki): the first gives the
  // table, the front and the picture; the others add gamma's file's and each mix's KLD on them.
  std::vector<std::string> eval_texts;
  // Choose: a file's validation score is the sum of its mean KLDs on these ("wiki":
  // wiki.valid.tokens, "python": python-calib.txt's held-back end, or paths); default wiki.
  std::vector<std::string> valid_texts;
  int eval_ctx = 512, eval_chunks = 8;
  int valid_chunks = 0;                // 0: eval_chunks
  // Race the variants (issue 44, "comparisons that cost what they tell"): each is measured on
  // the first race_chunks chunks of every validation text, and only the race_keep best of that
  // on all valid_chunks; the least of those full scores chooses. 0: every variant on every
  // chunk. In the six gamma runs measured (experiments/race_sim.py, results/race/), 1 chunk
  // and the best 3 chose the very file the full measurement chose, for 29 % of the chunk
  // evaluations.
  int race_chunks = 1, race_keep = 3;
  // And every variant within this fraction of the race_keep-th's race score. One chunk ranks close
  // variants by chance: raced on each of the 8 chunks in turn (experiments/race_sim.py --rotate,
  // results/race/rotate.md), 1 chunk and the best 3 chose the full measurement's file in 7 of 8
  // draws at Q2_K's size and 3 of 8 at 880MiB (0.00053 of validation KLD given up on average,
  // 0.6 of its error); within 3 %: 8 of 8 and 4 of 8 (0.00027), for 4.1 and 4.8 finalists.
  double race_margin = 0.03;
  bool front = true;                   // gamma's chosen variant at each mix's size too
  // Each other scorer's own best variant on validation (measured on every validation chunk if the
  // race left it out) also emitted and measured on the report texts: the allocators side by side
  // on the same chunks (a goal table's columns), at up to one emit and a full validation plus the
  // report evaluations per scorer. The choice is unchanged: it is among the race's finalists.
  bool each_scorer = false;
  // Speed budgets (tokens/s on this machine, as llama-bench's tg128 / pp512; 0: none): every
  // scorer is solved under them (solve/timed.h, priced by the speed table of src/speed), and the
  // report measures each file with llama-bench (bench_rounds rounds, each file's fastest kept).
  // Each is tokens/s, or a GGUF of the model: "as fast as this file" (speed::speed_target), or
  // a llama.cpp mix's name (as fast as that mix of this model), or kSizeMix: at each --size given
  // as a mix's name, as fast as that mix (a goal table's speed column, one run). Either may be a
  // list (the CLI splits commas) with one --size: a target per speed at that size (the
  // speed/quality front at one size, one run). Empty: no budget.
  std::vector<std::string> min_decode, min_prefill;
  static constexpr const char* kSizeMix = "mix";
  int bench_rounds = 2;
  // When gamma's file measures below a speed budget (the table's prediction is a model: 10-19 %
  // off on some files here), solve again with the budget raised by the shortfall, at most this
  // many times (0: report it only). Two: on Qwen-1.5B at Q3_K_M's size (an AMD EPYC) the first
  // retry still measured 0.957x the mix, the second 1.033x (results/speed_model/goal_auto_speed).
  int speed_retries = 2;
  // Device budget (speed/memory.h): llama.cpp's whole allocation to run the file with `ctx`
  // tokens of context (KV cache of `kv_type`, "" = f16) at most `memory_bytes` (0: none; the CLI
  // parses "2GiB" once).
  uint64_t memory_bytes = 0;
  std::string kv_type;
  int ctx = 0;
  bool dry_run = false;                // print the plan of work, its time and disk, and stop
  int threads = 0;                     // 0: all cores
  bool quiet = false;                  // no progress bars from the steps
  std::string gamma_exe;               // this program
  std::string llama_bin;               // directory of llama-imatrix and llama-quantize
};

Status run_pipeline(const RunOptions& opt);

// How many targets a run has: one per --size, or one per speed of a list at its one --size.
size_t target_count(const RunOptions& o);

}  // namespace gm
