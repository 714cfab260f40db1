// gamma report: the sweep's results as a Markdown table, a JSON summary and PNG plots.
//
// Input is a set of runs, each one method at one budget: a plan (gamma.plan), the eval of
// the GGUF made from it (gamma.eval), and optionally the scores behind the plan
// (gamma.scores). Runs come from run descriptors (gamma.runs, docs/formats.md) or from loose
// plan/eval/scores files, whose run is inferred (see load_inputs). Everything is read and
// checked before anything is drawn, and drawn before anything is written.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eval/result.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "report/formats.h"
#include "report/plot.h"
#include "scores/scores.h"
#include "util/json.h"
#include "util/status.h"

namespace gm::report {

// module -> candidate id -> Stage I probability p.
using ProbMap = std::map<std::string, std::map<std::string, double>>;
// One scores type for the whole project (scores/scores.h): p is empty for scorers without it.
using Scores = scores::Scores;

struct Run {
  std::string method;
  std::string label;            // "Q4_K_M", "3.00", ...: names the run within its method
  bool label_explicit = false;  // given by the descriptor or a uniform plan's type (drawn next to points)
  std::optional<double> budget_bpw;
  std::string plan_path, eval_path, scores_path;  // "" = none
  std::optional<Plan> plan;
  std::optional<eval::EvalResult> eval;
  std::optional<Scores> scores;

  // Derived when loading.
  std::optional<uint64_t> file_bytes;
  bool file_bytes_predicted = false;  // from the plan and pool, not a measured file
  std::optional<double> linear_bpw;
  // The budget if known, else the linear bpw: what runs are sorted and plotted by.
  std::optional<double> x_bpw() const { return budget_bpw ? budget_bpw : linear_bpw; }
};

struct Inputs {
  std::vector<Run> runs;  // methods in first-seen order, each sorted by budget
  std::optional<Manifest> pool;
  std::vector<std::string> notes;  // things skipped or worth a look, for the terminal
};

// Each path is a gamma.runs descriptor, a plan / eval / scores JSON, or a directory: its
// runs.json if there is one, else every plan / eval / scores / runs JSON in it. A loose eval
// joins the loose plan with its stem (plan "X.json" or "X.plan.json" for model "X.gguf" or
// eval "X.eval.json"); an eval without a plan is a run of method "gguf" named after its
// model file. A plan's scores are the descriptor's, else the file named in its
// info.scores.source. `pool_dir` (or the descriptor's "pool") gives exact sizes and bpw.
Result<Inputs> load_inputs(const std::vector<std::string>& paths, const std::string& pool_dir = "");

// Analyses (exposed for tests).
double cosine_similarity(const std::vector<double>& a, const std::vector<double>& b);  // NaN if undefined
double pearson(const std::vector<double>& x, const std::vector<double>& y);            // NaN if undefined
// bpw of a candidate id: the pool's figure when given, else the ggml type's (part before '@').
Result<double> candidate_bpw(const Manifest* pool, const std::string& module, const std::string& id);
// Pearson r between p[module][candidate] and [plan chose candidate] over every (module,
// candidate) pair p covers; NaN when undefined (no p, or constant vectors).
double choice_correlation(const Plan& plan, const ProbMap& p);

struct Options {
  bool log_y = false;    // KLD axis on a log scale
  bool heatmaps = true;  // one type heatmap per plan
};

struct Report {
  std::string table_md;
  Summary summary;                                   // report.json
  std::vector<std::pair<std::string, Image>> images;  // file name in OUTDIR -> image
  std::vector<std::string> notes;
};

Result<Report> build_report(const Inputs& in, const Options& opt);
// Creates `outdir` and writes table.md, report.json and the PNGs there (each atomically).
// Returns the paths written.
Result<std::vector<std::string>> write_report(const Report& r, const std::string& outdir);

}  // namespace gm::report
