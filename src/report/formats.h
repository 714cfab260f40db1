// The report's own files (docs/formats.md): the run list it reads (RUNS.json, "gamma.runs" v1)
// and the summary it writes (OUTDIR/report.json, "gamma.report" v1).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/json.h"
#include "util/status.h"

namespace gm::report {

// One run: one method at one budget. Paths as written: absolute, or relative to the list's
// directory; "" = none.
struct RunEntry {
  std::string method;
  std::string label;  // "" = derived (a uniform plan's type, an eval's GGUF stem, the budget)
  std::optional<double> budget_bpw;
  std::string plan, eval, scores;
};

struct RunList {
  static constexpr const char* kSchema = "gamma.runs";
  static constexpr int kVersion = 1;

  std::string pool;  // "" = none
  std::vector<RunEntry> runs;

  json to_json() const;
  // Unknown fields are refused (typos fail loudly); every run has a method and a plan or an eval.
  static Result<RunList> from_json(const json& j);
  static Result<RunList> load(const std::string& path);
};

// One row of report.json. Missing figures are null.
struct RunRow {
  struct Task {
    std::string name;
    std::optional<double> acc, acc_norm;
    std::optional<double> n;  // a number, as report.json has always written it
  };
  std::string method, label;
  std::optional<double> budget_bpw;
  std::optional<std::string> plan, eval, scores;
  std::optional<uint64_t> file_bytes;
  bool file_bytes_predicted = false;
  std::optional<double> linear_bpw, kld, kld_stderr, ppl, ppl_stderr, top1, top1_stderr;
  std::vector<Task> tasks;
  // Runs with a plan: modules per candidate id, and Pearson r(p, choice) (unset: undefined).
  std::optional<std::map<std::string, uint64_t>> types;
  std::optional<double> pearson_p_choice;
};

// Cosine similarity of the plans' allocation vectors; NaN where undefined (null in the file).
struct Cosine {
  std::vector<std::string> labels;
  std::vector<std::vector<double>> matrix;
  std::string vector;  // what the vectors hold
};

struct Summary {
  static constexpr const char* kSchema = "gamma.report";
  static constexpr int kVersion = 1;

  std::optional<std::string> pool;
  std::vector<RunRow> runs;
  std::optional<Cosine> cosine;

  json to_json() const;
  static Result<Summary> from_json(const json& j);
  static Result<Summary> load(const std::string& path);
};

}  // namespace gm::report
