#include "run/estimate.h"

#include <algorithm>
#include <map>

#include "speed/speed.h"

namespace gm::run {
namespace {

// Reference figures, 2 threads on the 2-core AMD EPYC the project is measured on.
constexpr double kQwenParams = 1.544e9;
constexpr double kTeacherTokS = 44;     // Qwen2.5-1.5B F32 forward, tokens/s
// gamma eval with the teacher's base cached: a part per file (loading, first-chunk warm-up)
// growing with the weights, and per token a part per weight and one per vocabulary entry (the
// log-softmax and the KLD against the base). Least squares over SmolLM2-135M (3.9 s),
// Qwen2.5-Coder-0.5B (10.9 s), Gemma-3-270M (9.6 s, a 262k vocabulary), 4 x 512 tokens
// (results/eval_cost.md), and Qwen2.5-Coder-1.5B's evals in results/job_cost_qwen (1 x 512: 8 s;
// 8 x 512: 33-37 s); each within 15 %. The earlier fit on the three small models alone priced
// Qwen-1.5B's 8 x 512 at 58 s: per-token overheads that do not grow with the weights dominate a
// small model.
constexpr double kEvalLoadS = 2.37, kEvalLoadSPerG = 1.08, kEvalSPerTokG = 3.32e-3, kEvalSPerTokVocab = 1.06e-8;
constexpr double kLayerStepS = 1.1;     // one Qwen Stage I layer step on 512 tokens
// The pool's per-type figures below came from the IQ sweep's part sidecars, measured beside other
// jobs; the quiet default job of results/job_cost_qwen ran the estimate at 0.59x and the pool at
// 0.62x of them (the same types at 128 rows and in full), so every type is scaled alike.
constexpr double kPoolQuiet = 0.6;

double scale(const ModelSize& m) { return m.params / kQwenParams * 2.0 / std::max(1, m.threads); }

}  // namespace

double teacher_seconds(const ModelSize& m, double tokens) { return m.forward_scale * tokens / kTeacherTokS * scale(m); }

double eval_seconds(const ModelSize& m, double tokens, bool teacher_cached) {
  const double per_tok = (kEvalSPerTokG * m.params / 1e9 + kEvalSPerTokVocab * m.vocab) * 2.0 / std::max(1, m.threads);
  return m.forward_scale * (kEvalLoadS + kEvalLoadSPerG * m.params / 1e9 + tokens * per_tok) +
         (teacher_cached ? 0 : teacher_seconds(m, tokens));
}

double imatrix_seconds(const ModelSize& m, double tokens) {
  // llama-imatrix runs the source file (not the F32 teacher) and collects each matmul's input
  // statistics: 171 s for 32 x 512 tokens on Qwen-1.5B (results/job_cost_qwen), 1.35x an eval of
  // as many tokens. It was priced as a teacher forward before, 429 s.
  return 1.35 * eval_seconds(m, tokens, true);
}

double activation_cache_bytes(const ModelSize& m, double tokens) { return tokens * (m.n_layer + 1) * m.n_embd * 2; }

double dequantize_seconds(const ModelSize& m) { return 10 * m.params / 1e9; }

double pool_type_seconds(const ModelSize& m, const std::string& type, double params) {
  // Seconds per 1e9 linear weights at 2 threads, from the Qwen pool's part sidecars
  // (results/iq_qwen/types.md); the imatrix-searched IQ grids are the slow ones.
  static const std::map<std::string, double> kSecPerG = {
      {"IQ2_XXS", 479}, {"IQ2_XS", 995}, {"IQ2_S", 368}, {"Q2_K", 269}, {"IQ3_XXS", 239}, {"IQ3_S", 176},
      {"Q3_K", 34},     {"IQ4_XS", 126}, {"IQ4_NL", 110}, {"Q4_0", 18}, {"Q4_K", 15},     {"Q4_1", 60},
      {"Q5_0", 19},     {"Q5_K", 62},    {"Q5_1", 60},    {"Q6_K", 19}, {"Q8_0", 9}};
  auto it = kSecPerG.find(type);
  const double per_g = it != kSecPerG.end() ? it->second : 100;
  return m.quantize_scale * kPoolQuiet * per_g * params / 1e9 * 2.0 / std::max(1, m.threads);
}

double hawq_seconds(const ModelSize& m, int samples, double calib_tokens) {
  // A fixed part + per weight, 4 samples, 4096 tokens, the traces on the estimate: Qwen-1.5B
  // (1.78 G weights counted as ModelSize does) 405, 383 and 349 s on three Xeons whose probes
  // said 0.87x, 0.83x and 0.74x the reference (job_cost_qwen_880_m167, job_cost_qwen_q2k_stream,
  // job_cost_qwen_cut/880: 466 s at the reference, each within 2 %); SmolLM2-135M 41 s
  // (results/hawq_converge_smollm2). The fit before, 136 + 386 per G (SmolLM2 188 s, Qwen 822 s,
  // from the first job's stored pool), priced those runs at 1.7-1.8x what they took.
  const double base = 6 + 259 * m.params / 1e9;
  return m.hawq_scale * base * (samples / 4.0) * (calib_tokens / 4096.0) * 2.0 / std::max(1, m.threads);
}

double hawq_rescore_seconds(const ModelSize& m, bool streamed) {
  // SmolLM2's 1,110 candidates: 3 s (the teacher loaded, each candidate dequantized and diffed).
  // Streamed, only the teacher is loaded: Qwen-1.5B 7 s and 8 s in the two streamed jobs at Q2_K's
  // size (results/job_cost_qwen_q2k_stream/), against 64 s from the stored pool.
  return m.torch_scale * (streamed ? 2 + 3 * m.params / 1e9 : 3 + 30 * m.params / 1e9 * 2.0 / std::max(1, m.threads));
}

double learn_seconds(const ModelSize& m, int steps, int layers_per_step, int batch_tokens) {
  const int layers = layers_per_step > 0 ? std::min(layers_per_step, m.n_layer) : m.n_layer;
  const double per_layer = kLayerStepS * (m.linear_params / std::max(1, m.n_layer)) / (kQwenParams * 0.85 / 28);
  return m.torch_scale * steps * layers * per_layer * batch_tokens / 512.0 * 2.0 / std::max(1, m.threads);
}

double window_share(int steps) {
  // results/prune_qwen/window.md, `gamma run --size 880MiB` (K 2, 3, 4: 43, 59, 74 %) and at
  // Q2_K's size (64, 73, 83 %), rounded up between the two.
  static const double kShare[] = {0.3, 0.45, 0.55, 0.7, 0.8, 0.9};
  return steps < 0 ? 1.0 : steps < 6 ? kShare[steps] : 1.0;
}

double mix_seconds(const ModelSize& m, const std::string& mix) {
  // Per 1e9 weights (as ModelSize counts them): Qwen-1.5B's IQ3_S 253 s and IQ3_M 240 s, Q3_K_M
  // 49 s (results/job_cost_qwen); the IQ grids' search is what costs.
  const bool iq = mix.rfind("IQ", 0) == 0;
  return m.quantize_scale * (iq ? 138.0 : 28.0) * m.params / 1e9 * 2.0 / std::max(1, m.threads);
}

double emit_seconds(const ModelSize& m) {
  // A file copied from the pool's candidates (the emit cache holds the rest): 1-3 s per variant
  // and ~4 s per `gamma layers` file on Qwen-1.5B (results/job_cost_qwen).
  return 1 + 1.5 * m.params / 1e9;
}

double speed_table_seconds(const ModelSize& m, size_t types, double reference_bytes) {
  // Measured on Qwen2.5-Coder-1.5B, 13 types, 2 threads, the Intel Xeon (ggml passes 0.98x the
  // reference's): 32 min 19 s, priced 4 min 43 s before as 1.5 s per kernel. Most of it is each
  // type's layers timed in context and the same kernels alone, three rounds (speed::CostModel::
  // type_scale): ~138 s a type, growing with the linear weights (results/speed_model/goal_degrid/).
  const double per_type = 107 * m.linear_params / 1e9;
  // Then llama-bench (-r 2, tg128 + pp512) of the reference and of each type's probe (a file of
  // about the reference's size, written at ~300 MB/s in each round), in 2 rounds, the reference again after
  // every few files (speed::bench_runs):
  // a decoded token reads the file at ~29 GB/s plus ~40 ms of compute per 1.78 G weights
  // (Qwen-1.5B: the 7.1 GB F32 teacher 4.05 tok/s, its 0.92 GB Q3_K_M mix 14.4), prompts at ~80
  // tokens/s per 1.78 G weights.
  const double g = m.params / 1.78e9;
  const double bench = 10 + 2 * (128 * (reference_bytes / 28.8e9 + 0.04 * g) + 512 / 80.0 * g);
  // Each probe is written before each of its llama-bench runs (one on disk at a time).
  const double probes = 2 * double(speed::bench_runs(types)) * bench + 2 * double(types) * reference_bytes / 300e6;
  return m.forward_scale * (double(types) * per_type + probes) * 2.0 / std::max(1, m.threads);
}

double bench_seconds(const ModelSize& m, size_t files, int rounds) {
  // llama-bench's model load plus tg128 and pp512, 2 repetitions: ~10 s + 3 s per 100M weights here.
  // The reference again after every few files (speed::bench_runs).
  return double(rounds) * double(speed::bench_runs(files)) * (10 + 3e-8 * m.params) * 2.0 / m.threads;
}

}  // namespace gm::run
