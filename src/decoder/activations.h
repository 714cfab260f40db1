// The teacher's hidden states at every layer boundary for a calibration set, computed once
// by libllama (F32 model, F32 KV cache) and cached on disk as F16 (or F32) under a key of
// model fingerprint, calibration text hashes and settings. Building is resumable (finished
// sequences are kept in a .partial directory) and publishes the cache by renaming it.
//
// Layout of CACHE_ROOT/<key>/: meta.json (schema gamma.activations v1), tokens.bin (int32,
// n_seq x seq_len) and h<B>.bin for boundary B = 0..n_layer (0: token embeddings, B: the
// output of layer B-1), each n_seq x seq_len x n_embd. An entry may hold only some boundaries
// (a rank of a layer-sharded job needs those of its layers only): each h<B>.bin is complete
// or absent, so an entry's part can be built where it is used or copied there with
// meta.json and tokens.bin, and a later run that needs more builds the rest into it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct CalibOptions {
  std::vector<std::string> text_files;  // empty: default_calibration_files()
  int64_t calib_tokens = 8192;          // rounded down to whole sequences (at least one)
  int seq_len = 256;  // CPU budget: 2 x 256 tokens a step keeps a Qwen-1.5B step near a minute
  bool f32 = false;                     // store F32 instead of F16
  int n_threads = 0;                    // libllama threads (0: all cores)
  std::string cache_root;               // empty: cache_dir()/activations
  bool quiet = false;                   // no progress bar
  // The boundaries this process needs, first..last (last < 0: through n_layer). The forward
  // pass costs the same either way; a range saves the disk of the boundaries not needed.
  int first_boundary = 0, last_boundary = -1;
  // Called with the count of sequences built after each one: a heartbeat for a sharded job,
  // and fault injection (the CLI's GAMMA_TEST_KILL_AT_SEQUENCE).
  std::function<void(int done)> on_sequence;
};

// gamma run's default calibration text (util/data.h: prose then code, never validation text),
// as the one file it is written to.
Result<std::vector<std::string>> default_calibration_files();

// Where the cache entries of `opt` live: opt.cache_root, else cache_dir()/activations.
std::string activation_cache_root(const CalibOptions& opt);

class ActivationCache {
 public:
  // Opens the cache for (teacher, options), building whatever is missing first.
  static Result<std::unique_ptr<ActivationCache>> open_or_build(const std::string& teacher_path,
                                                                 const CalibOptions& opt);
  ~ActivationCache();

  const std::string& dir() const { return dir_; }
  const std::string& key() const { return key_; }
  int n_seq() const { return n_seq_; }
  int seq_len() const { return seq_len_; }
  int64_t n_embd() const { return n_embd_; }
  int n_layer() const { return n_layer_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // n_seq x seq_len
  // Boundary `b` (one of the opened range) of the sequences `seqs`, converted to F32, into
  // dst (seqs.size() x seq_len x n_embd floats).
  Status read(int b, const std::vector<int>& seqs, float* dst) const;

 private:
  ActivationCache() = default;
  std::string dir_, key_;
  int n_seq_ = 0, seq_len_ = 0, n_layer_ = 0, first_ = 0;
  int64_t n_embd_ = 0;
  bool f32_ = false;
  std::vector<int32_t> tokens_;
  std::vector<int> fds_;  // one per boundary file of the range, from first_
};

// The entries under `root` (a cache root: activation_cache_root's), by key.
std::vector<std::string> activation_cache_keys(const std::string& root);
// Removes the entry `key` under `root`, unless another process is building it (its lock is
// held): false then, or when there is none. A process reading the entry keeps its open files
// (the data stays until they are closed); one opening it later builds it again.
Result<bool> drop_activation_cache(const std::string& root, const std::string& key);

// The calibration sequences for `opt` as the cache builds them (exposed for tests/bench):
// each file contributes an equal share of sequences, evenly spaced through its tokens; the
// first token of each sequence is BOS when the vocabulary wants one (as llama-perplexity).
class LlamaRunner;

Result<std::vector<std::vector<int32_t>>> calibration_sequences(LlamaRunner& runner, const CalibOptions& opt);

}  // namespace gm
