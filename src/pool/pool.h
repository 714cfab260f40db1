// `gamma pool`: quantize every linear module of a model at every admissible candidate type
// (ggml_quantize_chunk on the dequantized weights, imatrix-weighted as llama-quantize does),
// optionally import candidates from other GGUFs of the same model, and write POOL/:
//   cand-<TYPE>.gguf     every module's tensor at TYPE (original names)
//   import-<LABEL>.gguf  tensors taken from an imported GGUF
//   manifest.json        bytes, bpw, relative error per module x candidate (manifest.h)
//   cand-<TYPE>.json     the part's sidecar: per-module figures and the seconds it took
// Each candidate file is written atomically with a stats sidecar, so an interrupted build
// resumes at the first missing file.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "util/status.h"

namespace gm {

// The default candidate set ("auto"): the types no other type dominates (fewer bytes and less
// weight error on nearly every module), measured per block width (results/iq_*/types.md,
// gamma inspect POOL (pool/type_table.h); docs/design.md "Candidate types" says what is measured).
// Each module gets those its rows fit; IQ2_XXS and IQ2_XS only with an imatrix.
const std::vector<std::string>& default_candidate_types();
// "auto-speed", the set for a speed budget: the auto set and the types that decode faster than
// the types that dominate them in bytes and error. Q3_K has IQ3_S's bytes and more error, and
// decodes 2.3x as fast here (uniform Qwen-1.5B, llama-bench tg128 27.4 vs 11.8 tok/s,
// results/speed_model/); without it a plan held to a K mix's speed must split the mix's Q3_K
// modules into Q2_K and Q4_K (results/speed_model/goal_degrid/, Q3_K_M's size). Q4_0 has
// IQ4_NL's bytes and is repacked for the CPU's wide kernels; like IQ4_NL in auto, only on rows
// that 256-wide blocks cannot hold (elsewhere Q4_K has its bytes, less error and as much speed:
// uniform 37.3 vs Q4_0's 36.6 tok/s).
const std::vector<std::string>& fast_decode_types();
// The two names of a set: "auto" (no speed budget) and "auto-speed".
constexpr const char* kAutoTypes = "auto";
constexpr const char* kAutoSpeedTypes = "auto-speed";

struct PoolOptions {
  std::string model_path;
  std::vector<std::string> types;    // candidate type names, or {"auto"} or {"auto-speed"}
  std::string imatrix_path;          // optional
  std::vector<std::string> imports;  // "PATH" or "PATH:LABEL"
  std::string out_dir;
  int n_threads = 0;                 // 0: all cores
  bool quiet = false;                // no progress bar
  bool preview = false;              // the manifest's sizes only (ggml row sizes, rel_err 0, no
                                     // files, imports ignored): what a pool would hold, instantly
  // > 0: like preview, with each candidate's rel_err estimated from this many rows of each
  // module, evenly spaced (quantized as the pool would: ggml quantizes rows independently, so
  // the sampled rows' bytes are the full pool's). A few percent of the pool's time; no files.
  int64_t estimate_rows = 0;
  // With estimate_rows: write the estimate to out_dir as an estimate manifest
  // (Manifest::estimate_rows; each candidate's unweighted squared error, sq_err, for HAWQ-V2).
  bool save_estimate = false;
  // With save_estimate: mark it streamed (Manifest::streamed), a pool whose readers make the
  // candidates from the source (pool/candidate.h) instead of reading part files.
  bool stream = false;
  // Per module, the only candidate types to quantize (a module not named takes every type);
  // empty: no restriction. gamma run writes it from an estimate (run/prune.cpp).
  std::map<std::string, std::vector<std::string>> only;
};

// The `only` lists as a file (schema gamma.pool.only): what `gamma pool --only` reads.
json only_to_json(const std::map<std::string, std::vector<std::string>>& only);
Result<std::map<std::string, std::vector<std::string>>> load_only(const std::string& path);

Result<Manifest> build_pool(const PoolOptions& opt);

}  // namespace gm
