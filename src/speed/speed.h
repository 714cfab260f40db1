// Speed as a budget: how many tokens per second a GGUF (or a plan of a pool) decodes and
// processes on this machine, predicted from what each of its weight matrices costs here.
//
//   time per token = sum over matmul weights of the kernel's time (speed/kernels.h)
//                    x its type's factor in llama.cpp itself (probes, below)
//                    + the rest of the graph (attention, norms, rope, sampling glue)
//
// Kernel times are measured once per (CPU, ggml build, threads, type, shape) and kept under
// cache_dir()/speed. The rest is measured once per model: llama-bench on a reference file of
// that model (the source), minus its weights' kernel times; it is what llama-bench's tg128 and
// pp512 see (a context of up to 128 / 512 tokens), not a long context's attention.
//
// Probes: kernels timed in ggml chains missed what llama.cpp does around them by up to 19 % a
// type (Qwen's uniform Q6_K; SmolLM2's Q4_1 against Q4_0 by 30 %: mapped file pages against
// repacked copies, a tied head, the graph's barriers). So each type a plan may use is also
// measured in llama.cpp: llama-bench, in the same round-robin rounds as the reference, on a probe
// file -- the reference with every linear module that type can hold at that type (tiled random
// blocks: the kernels do not branch on values) -- and the type's prices are scaled so the probe is
// predicted as measured. One type of the reference (its largest share) keeps factor 1: a plan's
// time is a share-weighted mean of the probes', in which the rest's level cancels, so only
// differences between files identify the factors. Where no positive factor fits (a model whose
// time is mostly the rest), every factor is 1: the kernels alone, as before the probes. Probes
// cost one llama-bench per type and round, and the disk of one probe per type while measured
// (deleted after).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "pool/manifest.h"
#include "speed/kernels.h"
#include "util/json.h"
#include "util/status.h"

namespace gm {
class Model;
}

namespace gm::speed {

// A matrix llama.cpp multiplies by every token: a linear module, or the output head (which
// in prompt processing multiplies only the last token: llama.cpp computes no other logits).
struct Weight {
  std::string name;
  std::string type;  // ggml type name
  int64_t n_in = 0, n_out = 0;
  bool head = false;
};
// The file's weights at the types it holds. Fails on 3-D (expert) weights: a MoE's decode cost
// depends on how many experts a token uses, which this model does not price yet.
Result<std::vector<Weight>> weights_of(const Model& m);
// A plan's weights: each module at its candidate's type, the head at the plan's fixed type.
Result<std::vector<Weight>> weights_of(const Manifest& m, const Plan& p);
// The output head's tensor and shape in a manifest (output.weight, or token_embd when tied).
Result<Weight> head_of(const Manifest& m);

// A model's first layer (the shapes of its linear modules; types unset) and its layer count:
// what a type's kernels are put in context with (kernels.h, time_layers).
struct Layer {
  std::vector<MatSpec> shapes;
  int n_layer = 0;
};
Layer layer_of(const std::vector<Weight>& ws);
Layer layer_of(const Manifest& m);

// Both speeds of one file as llama-bench reports them (tokens per second).
struct Speed {
  double decode_tps = 0;   // tg128
  double prefill_tps = 0;  // pp512
  double decode_us() const { return decode_tps > 0 ? 1e6 / decode_tps : 0; }
  double prefill_us() const { return prefill_tps > 0 ? 1e6 * kPrefillBatch / prefill_tps : 0; }
};

// llama-bench (`llama_bench` is its path) on one file: tg128 and pp512, the fastest of `reps`
// repetitions (on a shared machine, others' load only adds time).
Result<Speed> bench(const std::string& llama_bench, const std::string& gguf, int threads, int reps);

// How many llama-bench runs one round of a check of `files` files takes (the probes count as
// files): the reference first and again after every few files (CostModel::calibrate).
size_t bench_runs(size_t files);

// The part of a token's time that is not a weight matrix, for one model on this machine.
struct Rest {
  double decode_us = 0, prefill_us = 0;  // prefill: per batch of kPrefillBatch tokens
  std::string reference;                 // the file it was measured on
  Speed reference_bench;                 // what llama-bench measured there
};

// The kernel timings of this machine (loaded from the cache; what is missing is measured and
// saved) and, once calibrated, one model's rest.
class CostModel {
 public:
  static Result<CostModel> open(int threads);
  int threads() const { return threads_; }

  // One weight's time alone; the head's prefill is one token's (time_matmul's decode_only).
  Result<KernelTime> kernel(const std::string& type, int64_t n_in, int64_t n_out, bool head = false);
  // A type's layers in context over the same kernels alone (decode, prefill ratios).
  Result<KernelTime> type_scale(const std::string& type, const Layer& layer);
  // A linear module's time in the model: its kernel scaled by its type's in-context ratio and
  // by the type's probe factor for the calibrated reference (1 where none was measured).
  Result<KernelTime> module(const std::string& type, int64_t n_in, int64_t n_out, const Layer& layer);
  // Decode and prefill time of a set of weights: modules by module(), the head alone (its
  // prefill is one token's).
  Result<KernelTime> weights_time(const std::vector<Weight>& ws);
  // The rest, measured with llama-bench on `reference` (a GGUF of the model), and the probe
  // factor of each of `types` and of the reference's own types (llama-bench on the reference and
  // the probes in `rounds` round-robin rounds, the reference again after every two files; a
  // file's speed is its median ratio to the reference beside it, times the reference's fastest);
  // cached by the reference's sha256, measured again when a type lacks its factor; the probes are
  // written under the cache. With `check` files (gamma speed --bench), measured again even when
  // cached, those files in the same rounds, their speeds into *measured: a shared machine's slow
  // phases of minutes (10-25 % on SmolLM2) then fall on the model's inputs and the files alike.
  Status calibrate(const std::string& llama_bench, const std::string& reference, int reps = 2,
                   const std::vector<std::string>& types = {}, int rounds = 2,
                   const std::vector<std::string>& check = {}, std::vector<Speed>* measured = nullptr);
  const Rest& rest() const { return rest_; }
  // The probe factors this machine's cache holds for `reference` (none: every factor 1), measuring
  // nothing: gamma solve prices a budget file's types by them (price_file).
  void use_cached_factors(const std::string& reference);
  // type -> probe factor (decode, prefill) of the calibrated reference.
  const std::map<std::string, KernelTime>& factors() const { return factor_; }
  bool calibrated() const { return !rest_.reference.empty(); }
  // Weights' time + the rest; needs calibrate().
  Result<Speed> predict(const std::vector<Weight>& ws);

 private:
  Status save() const;
  // kernel x type_scale: the price before the probe factor.
  Result<KernelTime> chain_price(const std::string& type, int64_t n_in, int64_t n_out, const Layer& layer);
  Status measure_probes(const std::string& llama_bench, const Model& reference, const std::string& sha, int reps,
                        const std::vector<std::string>& types, int rounds, const std::vector<std::string>& check,
                        std::vector<Speed>* measured);
  // `k` under `key` in `saved` (and the cache file), or, timed under other jobs' load, only in
  // memory for this process.
  Result<KernelTime> keep(const std::string& key, const KernelTime& k, std::map<std::string, KernelTime>& saved);
  int threads_ = 1;
  std::string path_, signature_;
  std::map<std::string, KernelTime> kernels_;  // "TYPE n_in n_out" (+ " head")
  std::map<std::string, Rest> rests_;          // reference sha256 -> rest
  std::map<std::string, KernelTime> scales_;   // "scale TYPE n_layer shapes..." -> ratios
  std::map<std::string, KernelTime> unsaved_;  // kernels and scales timed under load (KernelTime::loaded)
  std::map<std::string, KernelTime> probes_;   // "reference-sha256 TYPE" -> probe factor
  Rest rest_;
  std::map<std::string, KernelTime> factor_;  // the calibrated reference's probe factors by type
};

// gamma.speed v1 (`gamma speed --pool`): what every candidate of every module of a pool costs
// here, the head at each type a plan may give it, and the model's rest. Stage II reads it to
// budget decode or prompt time (solve/request.h).
struct CostTable {
  static constexpr const char* kSchema = "gamma.speed";
  static constexpr int kVersion = 1;
  std::string model_fingerprint;
  std::string machine;  // kernel_signature() and threads
  int threads = 0;
  Rest rest;
  // module name -> candidate id -> time; "head" entries under the head tensor's name, by type.
  std::map<std::string, std::map<std::string, KernelTime>> cost;

  static Result<CostTable> load(const std::string& path);
  Status save(const std::string& path) const;
  json to_json() const;
  static Result<CostTable> from_json(const json& j);
  // Fails naming a module or candidate of `m` the table does not price.
  Status covers(const Manifest& m) const;
  // One entry; fails naming what the table lacks.
  Result<KernelTime> at(const std::string& tensor, const std::string& id) const;
  // A plan's speed by this table (what CostModel::predict says, without measuring anything).
  Result<Speed> predict(const Manifest& m, const Plan& p) const;
  // A GGUF of the same model (e.g. a llama.cpp mix) by this table; fails naming a weight at a
  // type the table does not price.
  Result<Speed> predict(const Model& file) const;
  // Weights at the types (for a module: the candidate ids) the table prices them by.
  Result<Speed> predict(const std::vector<Weight>& ws) const;
  // The rest measured again on `reference` (a GGUF of the same model whose weights the table
  // prices): llama-bench's `measured` speed of it minus the table's own prices of its weights, so
  // the table predicts that file exactly as measured.
  Status rest_on(const std::string& reference, const Speed& measured);
};

// A speed budget as the user gives it: tokens/s ("27.4"), or a GGUF file of the pool `m`'s model,
// meaning "at least as fast as this file here" by the same table (`decode`: its tg128, else its
// pp512). The file form carries the table's own bias on both sides of the comparison: measured,
// the prediction's absolute error moved by 10-19 % between runs on this machine while the ratio
// of two files' predictions held within 2 % (results/speed_model/goal_qwen/).
Result<double> speed_target(const std::string& arg, const Manifest& m, const CostTable& t, bool decode);
// Adds to `t` every weight of `file` (a GGUF of the pool `m`'s model) at its own type where the
// table lacks it, measured on `cm` as cost_table measures the candidates (with the probe factors
// cm holds: a type never probed is priced by its kernels alone); returns how many. So a
// budget named by a file whose types are not among the candidates (llama.cpp's Q4_0 of a model
// whose pool has no Q4_0) is priced by the same table, in seconds, instead of refused.
Result<int> price_file(CostTable& t, const Manifest& m, const std::string& file, CostModel& cm);
// price_file for each of --min-decode and --min-prefill that names a file (an error names its
// option), `cm` opened at the table's threads when the first one does; returns how many prices
// were added (the caller saves the table when any were). gamma run and gamma solve both.
Result<int> price_speed_targets(CostTable& t, const Manifest& m, const std::string& min_decode,
                                const std::string& min_prefill, std::optional<CostModel>& cm);
// Adds to `t` (of `m`'s model, measured on this machine at cm's threads) every candidate and
// head type of `m` it lacks, as cost_table measures them; returns how many. A pool grown by
// types (a run resumed under a speed budget, whose pool takes auto-speed's) keeps its table.
Result<int> price_candidates(CostTable& t, const Manifest& m, CostModel& cm);
// --min-decode and --min-prefill (either may be empty: 0) resolved by speed_target, an error
// naming its option.
struct SpeedTargets {
  double decode_tps = 0, prefill_tps = 0;
};
Result<SpeedTargets> speed_targets(const std::string& min_decode, const std::string& min_prefill, const Manifest& m,
                                   const CostTable& t);
// Whether a speed target is given as a file that exists (not as tokens/s, not missing).
bool names_file(const std::string& arg);
// What speed_target checks before any table exists: a number >= 0, or a file that exists.
Status check_speed_target(const std::string& arg);

// Measures (or reads from the cache) every candidate and head type of the pool, and the rest
// on `reference` (a GGUF of the same model; empty: the pool's source, which for a pool of an
// F32 teacher is a slow file to measure).
Result<CostTable> cost_table(const Manifest& m, CostModel& cm, const std::string& llama_bench,
                             const std::string& reference = "");

}  // namespace gm::speed
