// Zero-shot multiple choice on llm-foundry JSONL tasks, scored like lm-eval-harness:
// each option's log-likelihood of its continuation given its context; acc = argmax of the
// sum, acc_norm = argmax of the sum divided by the continuation's length in characters;
// standard errors are the sample standard deviation over items / sqrt(n).
//
// Task file (one JSON object per line, blank lines ignored), either
//   {"query": "...", "choices": ["...", ...], "gold": i}           (multiple choice), or
//   {"context_options": ["...", ...], "continuation": "...", "gold": i}   (schema)
// An option's text is context + delimiter + continuation, with trailing whitespace of
// context+delimiter moved to the continuation (lm-eval's _encode_pair). The delimiter is
// llm-foundry's continuation_delimiter: "\nAnswer: " for arc_*, piqa, boolq, mmlu; " " else.
#pragma once
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "llama/context.h"
#include "util/status.h"

namespace gm {
class Progress;
}

namespace gm::eval {

struct McItem {
  std::vector<std::string> contexts;       // one per option (schema) or one shared
  std::vector<std::string> continuations;  // one per option (choices) or one shared
  int gold = 0;
  int n_options() const { return int(std::max(contexts.size(), continuations.size())); }
  const std::string& context(int o) const { return contexts.size() == 1 ? contexts[0] : contexts[o]; }
  const std::string& continuation(int o) const {
    return continuations.size() == 1 ? continuations[0] : continuations[o];
  }
};

struct McTask {
  std::string name;  // file name without .jsonl
  std::string path;
  std::string delimiter;
  size_t n_in_file = 0;  // items in the file (before --limit)
  std::vector<McItem> items;
};

// The default tasks folder: tasks/ of the shared data folder (util/data.h).
std::string default_tasks_dir();
// A task given as a path to a .jsonl file or as a name looked up as DIR/NAME.jsonl.
Result<std::string> resolve_task(const std::string& name_or_path, const std::string& tasks_dir);
std::string default_delimiter(const std::string& task_name);
// Parses and validates every line; `limit` > 0 keeps the first `limit` items.
Result<McTask> load_task(const std::string& path, const std::optional<std::string>& delimiter, int limit);

struct McOptions {
  int n_batch = 2048;  // tokens per decode (items are packed whole)
  int n_seq = 128;     // sequences (options) per decode
  int n_threads = 0;
};

struct McResult {
  int n = 0;
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;
  uint64_t n_tokens = 0;  // tokens decoded
  double seconds = 0;
  std::vector<std::vector<double>> loglik;  // per item, per option
  // Per item '1' (right) or '0': two models scored on the same items compare paired, with the
  // standard error of the per-item difference instead of two independent ones.
  std::string correct, correct_norm;
};

Result<McResult> score_task(const llama::LlamaModel& model, const McTask& task, const McOptions& opt,
                            Progress* progress);

// lm-eval's mean_stderr: sample standard deviation (n-1) over sqrt(n).
double mean_stderr(const std::vector<double>& x);

}  // namespace gm::eval
