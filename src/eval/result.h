// One `gamma eval` result (EVAL.json, schema "gamma.eval" v1, docs/formats.md). Its own small
// library (gamma_eval_result, no libllama): eval writes it, report and run read it.
//
// Every figure is optional: an eval without a teacher has no kld, a task-only one no
// perplexity, and hand-made files may carry only what their reader needs. Reading checks the
// type of every field present; to_json writes what eval writes, in its order, every field of
// a section that is there (null when unknown), so a file read and written again is unchanged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm::eval {

struct EvalResult {
  static constexpr const char* kSchema = "gamma.eval";
  static constexpr int kVersion = 1;
  template <typename T>
  using Opt = std::optional<T>;

  struct Model {
    Opt<std::string> path, sha256;
    Opt<uint64_t> file_bytes;
    Opt<std::string> desc;
    Opt<uint64_t> n_params, tensor_bytes;
    Opt<double> bpw;
    Opt<uint64_t> n_vocab;
    Opt<std::string> fingerprint;  // gamma's identity (header + tensor directory); the CLI adds it
  };
  struct Teacher {
    Opt<std::string> path, sha256;
    Opt<uint64_t> file_bytes;
  };
  struct Perplexity {
    Opt<double> ppl, ppl_stderr, nll_mean, nll_stderr;
    Opt<uint64_t> chunks, tokens_scored;
    Opt<double> seconds, tokens_per_second;
  };
  struct DeltaP {  // p(student) - p(teacher) of the right token
    Opt<double> mean, mean_stderr, rms, rms_stderr, median, p1, p99, min, max;
  };
  struct Kld {
    Opt<uint64_t> tokens;
    Opt<double> mean, mean_stderr, median, p90, p95, p99, p99_9, max, min, top1, top1_stderr;
    DeltaP delta_p;
    Opt<double> ppl, ppl_stderr, ppl_base, ppl_base_stderr, ln_ppl_ratio, ln_ppl_ratio_stderr, ppl_ratio,
        ppl_ratio_stderr, ppl_diff, ppl_diff_stderr, ln_ppl_correlation;
    Opt<std::string> base_file;  // unset: the teacher ran side by side and nothing was saved
    Opt<bool> base_reused;
    // Each chunk's mean KLD, in chunk order (added after v1): two files evaluated on the same
    // chunks are compared pair by pair, which cancels the chunks' own difficulty.
    Opt<std::vector<double>> chunk_means;
  };
  struct Task {
    std::string name;
    Opt<std::string> path, sha256;
    Opt<uint64_t> n, n_in_file;
    Opt<std::string> delimiter;
    Opt<double> acc, acc_stderr, acc_norm, acc_norm_stderr;
    Opt<std::string> correct, correct_norm;  // per item in file order, '1' right / '0' wrong
    Opt<uint64_t> tokens;
    Opt<double> seconds;
  };
  struct Text {
    Opt<std::string> path, sha256;
    Opt<uint64_t> tokens;
  };
  struct Settings {
    Opt<uint64_t> threads, batch;
    Opt<uint64_t> ctx, chunks, ubatch;  // with a perplexity (text mode)
    Opt<Text> text;                     // unset: KLD from a --kld-base file alone
    Opt<uint64_t> limit;                // with tasks; unset: every item
  };

  Model model;
  Opt<Teacher> teacher;
  Opt<Perplexity> perplexity;
  Opt<Kld> kld;
  Opt<std::vector<Task>> tasks;  // in the order evaluated
  Settings settings;
  Opt<double> seconds;

  const Task* task(const std::string& name) const;

  json to_json() const;
  // Errors name the field ("field 'kld.mean' is not a number") with code corrupt.
  static Result<EvalResult> from_json(const json& j);
  static Result<EvalResult> load(const std::string& path);  // errors name the file too
  Status save(const std::string& path) const;               // atomic
};

// Two evaluations on the same chunks, pair by pair: the mean of a - b over the chunks and its
// standard error (the chunks' own difficulty cancels).
struct PairedDiff {
  double mean = 0, stderr_ = 0;  // of a - b over the chunks
  size_t n = 0;
};
// a and b: each chunk's mean KLD, the same chunks in the same order (at least two).
Result<PairedDiff> paired_difference(const std::vector<double>& a, const std::vector<double>& b);
// The same from two eval results (gamma.eval with chunk_means), checked to be on the same text,
// context and chunks.
Result<PairedDiff> paired_difference(const EvalResult& a, const EvalResult& b);

}  // namespace gm::eval
