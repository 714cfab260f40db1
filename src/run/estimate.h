// What `gamma run`'s steps will cost before they run: seconds and disk, from throughputs
// measured on the 2-core reference machine (AMD EPYC, AVX-512; docs/design.md "Operations"), scaled by
// the model's parameter count and the thread count. Estimates for --dry-run and the ETA on
// each step's line, not promises: another CPU or a busy machine changes them.
#pragma once
#include <cstdint>
#include <string>

namespace gm::run {

struct ModelSize {
  double params = 0;         // every weight of the model
  double linear_params = 0;  // those of the linear modules (what the pool quantizes)
  double vocab = 0;          // the vocabulary (an eval's log-softmax and KLD per token)
  double n_embd = 0;         // the hidden size (the activation caches' width)
  int n_layer = 0;
  int threads = 2;
  // This machine's time over the reference machine's for the same work (calibrate_machine):
  // quantizing (the pool, the estimate, llama-quantize), ggml's forward passes (imatrix, evals,
  // gamma layers) and LibTorch's (Stage I; HAWQ-V2's traces apart, hawq_scale: on the Xeon they
  // ran at 0.52x the reference's figure while Stage I ran at 0.83x, results/job_cost_qwen_q2k_stream/
  // hawq_traces/). 1: the reference's figures.
  double quantize_scale = 1, forward_scale = 1, torch_scale = 1, hawq_scale = 1;
};

// The teacher's hidden states on `tokens` calibration tokens at every layer boundary, F16, as
// HAWQ-V2 and Stage I cache them in gamma's cache (decoder/activations.h): Qwen-1.5B's 4,096
// tokens for HAWQ-V2, 365 MB measured.
double activation_cache_bytes(const ModelSize& m, double tokens);
// F32 teacher forward (dequantize's output; llama-imatrix, HAWQ, Stage I's activations).
double teacher_seconds(const ModelSize& m, double tokens);
// One quantized file scored against the teacher: its own forward over `tokens`, plus the
// teacher's forward the first time (when the base file is not cached yet).
double eval_seconds(const ModelSize& m, double tokens, bool teacher_cached);
double dequantize_seconds(const ModelSize& m);
// llama-imatrix over `tokens` calibration tokens of the source.
double imatrix_seconds(const ModelSize& m, double tokens);
// One candidate type of the pool over the `params` weights of the modules that take it.
double pool_type_seconds(const ModelSize& m, const std::string& type, double params);
double hawq_seconds(const ModelSize& m, int samples, double calib_tokens);
// HAWQ-V2 from known traces (--traces-from): every candidate dequantized once, or, from a streamed
// pool's manifest, each candidate's recorded squared perturbation read (`streamed`).
double hawq_rescore_seconds(const ModelSize& m, bool streamed);
double learn_seconds(const ModelSize& m, int steps, int layers_per_step, int batch_tokens);
// The share of the full pool's time (and disk) a pool window of `steps` quantizes (RunOptions::
// pool_window): measured on Qwen-1.5B near its IQ3/Q3_K mixes (results/prune_qwen/).
double window_share(int steps);
// llama-quantize of one standard mix from the F32 teacher.
double mix_seconds(const ModelSize& m, const std::string& mix);
double emit_seconds(const ModelSize& m);
// The speed table (gamma speed --pool): each type's kernels timed alone and its layers in context,
// then llama-bench of the reference file (reference_bytes, the model gamma run was given);
// nothing when this machine's cache has them.
double speed_table_seconds(const ModelSize& m, size_t types, double reference_bytes);
// gamma speed --bench of `files` files (the source beside them), `rounds` rounds of tg128 + pp512.
double bench_seconds(const ModelSize& m, size_t files, int rounds);

}  // namespace gm::run
