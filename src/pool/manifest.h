// The pool manifest (POOL/manifest.json, schema "gamma.pool", version 1): what every
// candidate of every linear module costs and how much it distorts the weights.
// Stage I, Stage II, emit and report read it; only pool/ writes it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm {

// One candidate of one module. A candidate id is a ggml type name ("Q4_K") for candidates
// gamma quantized itself, or "TYPE@SOURCE" ("Q6_K@unsloth") for ones imported from another
// GGUF (--import); the ggml type is the part before '@'.
struct Candidate {
  std::string id;
  std::string type;         // ggml type name
  uint64_t bytes = 0;       // tensor data bytes, block scales included (what bpw counts)
  uint64_t file_bytes = 0;  // bytes padded to the GGUF alignment (what the file holds)
  double bpw = 0;           // 8 * bytes / n_params
  double rel_err = 0;       // sum_j w_j (x - q)^2 / sum_j w_j x^2, w = imatrix (or 1)
  // An estimate's candidates only (Manifest::estimate_rows > 0): ||W_b - W||^2, unweighted,
  // scaled from the sampled rows to the whole tensor (what HAWQ-V2's Omega multiplies); -1 if not.
  double sq_err = -1;
  std::string file;         // candidate GGUF inside the pool dir holding this tensor (none in an estimate)
};

struct ModuleEntry {
  std::string name;  // "blk.3.ffn_down.weight"
  int layer = -1;
  std::string kind;  // attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down
  std::vector<int64_t> shape;  // ggml order (row width first)
  int64_t n_params = 0;
  std::string source_type;     // type in the source model
  std::vector<Candidate> candidates;  // sorted by bytes ascending
  const Candidate* find(const std::string& id) const;
};

// A tensor that is not a linear module (token_embd, output, norms): it keeps one type,
// chosen by the plan (default: llama.cpp's choice for the nearest standard mix).
struct FixedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string source_type;
  // False for what llama-quantize leaves alone (norms, a MoE router, ...): it keeps its source
  // type in every plan. Manifests before this field: true.
  bool quantize = true;
};

struct Manifest {
  static constexpr const char* kSchema = "gamma.pool";
  static constexpr int kVersion = 1;

  std::string dir;             // the pool directory (not serialized)
  std::string model_path;
  std::string model_fingerprint;  // Model::fingerprint() of the source
  std::string arch;
  int n_layer = 0;
  std::string imatrix_path;       // empty when none
  std::string imatrix_sha256;
  std::vector<std::string> types;  // the --types grid
  std::vector<ModuleEntry> modules;  // in source tensor order
  std::vector<FixedTensor> fixed;    // in source tensor order
  uint64_t alignment = 32;
  // The GGUF header size and tensor directory of an emitted file do not depend on types,
  // so a file's size is header_bytes + sum of every tensor's file_bytes (emit checks it).
  uint64_t header_bytes = 0;
  // > 0: an estimate (`gamma pool --estimate-rows N`): exact sizes, errors from N sampled rows
  // per module, no candidate files. Solve and HAWQ-V2 read it (to choose what the real pool
  // quantizes); whatever needs the candidates' bytes refuses it (estimate_error).
  int64_t estimate_rows = 0;
  // A streamed pool (`gamma pool --stream`): an estimate whose candidates are made from the
  // source when a reader needs them (pool/candidate.h: the bytes a stored pool holds), so none
  // is on disk. Stage I's candidate store, HAWQ-V2 (from sq_err) and emit read it.
  bool streamed = false;
  // The one refusal, for readers of candidate bytes: ok unless this is an estimate not streamed.
  Status needs_candidates() const;
  // The other, for readers that make bytes from the source (emit; a streamed pool's readers):
  // the source must be the one the pool was made from, and a streamed pool's imatrix too (its
  // candidates are made with it). `imatrix_sha256` is that of the imatrix as loaded now.
  Status check_source(const std::string& fingerprint, const std::string& imatrix_sha256) const;

  int64_t total_params() const;
  const ModuleEntry* find(const std::string& name) const;

  static Result<Manifest> load(const std::string& pool_dir);
  Status save() const;  // atomic, to dir/manifest.json
  json to_json() const;
  static Result<Manifest> from_json(const json& j, const std::string& dir);
};

}  // namespace gm
