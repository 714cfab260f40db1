// gamma report: a Markdown table, a JSON summary and PNG plots from run descriptors, plans,
// evals and scores (src/report).
#include <cstdio>

#include "cli/command.h"
#include "report/report.h"

namespace gm::cli {
namespace {

void add_report(CLI::App& app) {
  struct Opts {
    std::vector<std::string> inputs;
    std::string out, pool;
    bool log_y = false, no_heatmaps = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand(
      "report", "table (Markdown) and plots (PNG) of a sweep from its runs.json / plan / eval / scores JSONs");
  c->add_option("inputs", o->inputs,
                "runs.json descriptors, result directories (their runs.json, else every plan/eval/scores JSON), "
                "or plan / eval / scores JSON files")
      ->required();
  c->add_option("-o,--output", o->out, "directory to write table.md, report.json and the PNGs into")->required();
  c->add_option("--pool", o->pool, "pool directory: exact sizes and bpw of the plans (default: the descriptor's)");
  c->add_flag("--log-y", o->log_y, "KLD on a log scale in kld_vs_size.png");
  c->add_flag("--no-heatmaps", o->no_heatmaps, "no per-plan type heatmaps");
  c->callback([o] {
    report::Inputs in = value_or_fail(report::load_inputs(o->inputs, o->pool));
    report::Options opt;
    opt.log_y = o->log_y;
    opt.heatmaps = !o->no_heatmaps;
    report::Report r = value_or_fail(report::build_report(in, opt));
    std::vector<std::string> written = value_or_fail(report::write_report(r, o->out));
    for (const auto& n : r.notes) std::fprintf(stderr, "gamma: note: %s\n", n.c_str());
    std::printf("%zu runs -> %zu files in %s\n", in.runs.size(), written.size(), o->out.c_str());
    for (const auto& w : written) std::printf("  %s\n", w.c_str());
  });
}

}  // namespace
GAMMA_COMMAND(90, add_report);
}  // namespace gm::cli
