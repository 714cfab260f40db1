#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "gguf_model/model.h"
#include "util/files.h"

namespace fs = std::filesystem;

namespace gm::report {
namespace {

// The schema a JSON file declares, or an error for unreadable / non-JSON files.
Result<std::string> schema_of(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::errorf(Status::Code::kCorrupt, "{}: not valid JSON", path);
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
    return Status::errorf(Status::Code::kNotFound, "{}: no \"schema\" field (not a gamma file)", path);
  return j["schema"].get<std::string>();
}

std::string stem_of(const std::string& path, const char* strip_suffix = nullptr) {
  std::string s = fs::path(path).stem().string();
  if (strip_suffix) {
    const std::string suf = strip_suffix;
    if (s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0)
      s.resize(s.size() - suf.size());
  }
  return s;
}

std::string canonical(const std::string& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return ec ? p : c.string();
}

// A descriptor's path: absolute, or relative to the descriptor's directory.
std::string resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(base_dir) / p).lexically_normal().string();
}

// One run of a descriptor, its paths resolved.
struct RunSpec : RunEntry {
  std::string base_dir;  // the descriptor's (or the input directory's): scores paths in plans may be relative to it
};

Status load_descriptor(const std::string& path, std::vector<RunSpec>* out, std::string* pool) {
  GAMMA_ASSIGN_OR_RETURN(RunList list, RunList::load(path));
  const std::string dir = fs::path(path).parent_path().string();
  if (!list.pool.empty()) {
    const std::string pd = resolve(dir, list.pool);
    if (!pool->empty() && canonical(*pool) != canonical(pd))
      return Status::errorf("{}: pool {} differs from the pool {} given before", path, pd, *pool);
    *pool = pd;
  }
  for (const RunEntry& e : list.runs) {
    RunSpec s{e, dir};
    s.plan = resolve(dir, e.plan), s.eval = resolve(dir, e.eval), s.scores = resolve(dir, e.scores);
    out->push_back(std::move(s));
  }
  return Status::ok();
}

std::string fmt_bpw(double b) { return fmt::format("{:.2f}", b); }

// Linear bpw of a GGUF on disk (header only): bytes over parameters of its linear modules.
std::optional<double> gguf_linear_bpw(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  auto m = Model::open(path);
  if (!m.is_ok()) return std::nullopt;
  uint64_t bytes = 0;
  int64_t params = 0;
  for (const auto& l : (*m)->linear()) {
    const TensorInfo& t = (*m)->tensors()[l.tensor];
    bytes += t.nbytes, params += t.n_elements();
  }
  if (params == 0) return std::nullopt;
  return 8.0 * double(bytes) / double(params);
}

// Where a plan's info.scores.source points, if that file can be found.
std::string find_plan_scores(const Run& r, const std::string& base_dir,
                             const std::map<std::string, std::string>& loose_scores) {
  if (!r.plan) return "";
  Status unreadable;  // a malformed source is no source
  const auto src = FieldReader(r.plan->info, &unreadable).object("scores").opt<std::string>("source");
  if (!unreadable.is_ok() || !src || src->empty()) return "";
  std::error_code ec;
  const std::string plan_dir = fs::path(r.plan_path).parent_path().string();
  const std::string name = fs::path(*src).filename().string();
  std::vector<std::string> cands = {*src};
  for (const std::string& d : {base_dir, plan_dir, fs::path(plan_dir).parent_path().string()})
    if (!d.empty()) cands.push_back(resolve(d, *src));
  cands.push_back(resolve(plan_dir, name));
  // Candidates that are not scores files (e.g. a plan sharing the scores' basename) are skipped.
  for (const std::string& c : cands) {
    if (!fs::is_regular_file(c, ec)) continue;
    auto sch = schema_of(c);
    if (sch.is_ok() && *sch == Scores::kSchema) return c;
  }
  auto it = loose_scores.find(name);
  return it == loose_scores.end() ? "" : it->second;
}

}  // namespace

double cosine_similarity(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  size_t n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) continue;
    ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i], ++n;
  }
  if (n == 0 || aa <= 0 || bb <= 0) return NAN;
  return ab / std::sqrt(aa * bb);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return NAN;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= double(n), my /= double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
  }
  if (sxx <= 0 || syy <= 0) return NAN;
  return sxy / std::sqrt(sxx * syy);
}

Result<double> candidate_bpw(const Manifest* pool, const std::string& module, const std::string& id) {
  if (pool) {
    const ModuleEntry* e = pool->find(module);
    const Candidate* c = e ? e->find(id) : nullptr;
    if (c) return c->bpw;
  }
  const std::string type = id.substr(0, id.find('@'));
  auto t = parse_type(type);
  if (!t.is_ok()) return Status::errorf("module {}: candidate '{}' is not a ggml type", module, id);
  const auto bs = ggml_blck_size(*t);
  if (bs <= 0) return Status::errorf("module {}: type {} has no size", module, type);
  return 8.0 * double(ggml_type_size(*t)) / double(bs);
}

double choice_correlation(const Plan& plan, const ProbMap& p) {
  std::vector<double> x, y;
  for (const auto& [mod, probs] : p) {
    auto it = plan.modules.find(mod);
    if (it == plan.modules.end()) continue;
    for (const auto& [cand, v] : probs) x.push_back(v), y.push_back(cand == it->second ? 1.0 : 0.0);
  }
  return pearson(x, y);
}

namespace {

// Every input sorted by what it is: run descriptors (runs.json) into specs, loose plans, evals
// and scores files; a directory contributes its runs.json or its gamma JSON files.
struct Collected {
  std::vector<RunSpec> specs;
  std::vector<std::string> loose_plans, loose_evals;
  std::map<std::string, std::string> loose_scores;  // file name -> path
  std::string pool;
};

Result<Collected> collect_inputs(const std::vector<std::string>& paths, const std::string& pool_dir) {
  Collected in;
  auto& specs = in.specs;
  auto& loose_plans = in.loose_plans;
  auto& loose_evals = in.loose_evals;
  auto& loose_scores = in.loose_scores;
  std::string& pool = in.pool;
  pool = pool_dir;
  const bool pool_from_cli = !pool_dir.empty();
  auto take_file = [&](const std::string& f, bool explicit_arg) -> Status {
    auto sch = schema_of(f);
    if (!sch.is_ok()) {
      // In a directory, JSON that is not a gamma file is skipped; one that cannot be read or
      // parsed is flagged (it may be a truncated result).
      if (explicit_arg || sch.status().code() != Status::Code::kNotFound) return sch.status();
      return Status::ok();
    }
    if (*sch == RunList::kSchema) {
      std::string desc_pool = pool_from_cli ? "" : pool;
      GAMMA_RETURN_IF_ERROR(load_descriptor(f, &specs, &desc_pool));
      if (!pool_from_cli) pool = desc_pool;
    } else if (*sch == Plan::kSchema) {
      loose_plans.push_back(f);
    } else if (*sch == eval::EvalResult::kSchema) {
      loose_evals.push_back(f);
    } else if (*sch == Scores::kSchema) {
      loose_scores[fs::path(f).filename().string()] = f;
    } else if (explicit_arg) {
      return Status::errorf("{}: schema '{}' is not a run descriptor, plan, eval or scores file", f, *sch);
    }
    return Status::ok();
  };
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      const std::string runs = (fs::path(p) / "runs.json").string();
      if (fs::is_regular_file(runs, ec)) {
        GAMMA_RETURN_IF_ERROR(take_file(runs, true));
        continue;
      }
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
      if (ec) return Status::errorf("{}: {}", p, ec.message());
      std::sort(files.begin(), files.end());
      const size_t before = specs.size() + loose_plans.size() + loose_evals.size() + loose_scores.size();
      for (const auto& f : files) GAMMA_RETURN_IF_ERROR(take_file(f, false));
      if (specs.size() + loose_plans.size() + loose_evals.size() + loose_scores.size() == before)
        return Status::errorf("{}: no runs.json and no plan, eval or scores JSON in it", p);
    } else if (fs::exists(p, ec)) {
      GAMMA_RETURN_IF_ERROR(take_file(p, true));
    } else {
      return Status::errorf("{}: no such file or directory", p);
    }
  }

  return in;
}

// Loose files: a plan per run, evals joined by stem, other evals on their own.
Status pair_loose_files(Collected& in) {
  auto& specs = in.specs;
  std::set<std::string> used_evals;
  for (const auto& pl : in.loose_plans) {
    RunSpec s;
    s.plan = pl;
    const std::string stem = stem_of(pl, ".plan");
    for (const auto& ev : in.loose_evals) {
      if (used_evals.count(ev)) continue;
      std::string model_stem;
      auto e = eval::EvalResult::load(ev);  // an unreadable one fails when its run is loaded
      if (e.is_ok() && e->model.path) model_stem = stem_of(*e->model.path);
      if (model_stem == stem || stem_of(ev, ".eval") == stem) {
        s.eval = ev;
        used_evals.insert(ev);
        break;
      }
    }
    specs.push_back(std::move(s));
  }
  for (const auto& ev : in.loose_evals)
    if (!used_evals.count(ev)) {
      RunSpec s;
      s.eval = ev;
      specs.push_back(std::move(s));
    }
  if (specs.empty()) return Status::error("no plan or eval among the inputs (scores alone make no run)");
  return Status::ok();
}

// A run's plan: checked against the pool (when given), its method, budget, label and sizes.
Status load_run_plan(const RunSpec& s, const Manifest* pm, Run& r) {
  auto p = Plan::load(s.plan);
  if (!p.is_ok()) return p.status();
  r.plan = std::move(p).value();
  if (pm) {
    Status v = r.plan->validate(*pm);
    if (!v.is_ok()) return v.with_context(s.plan);
  }
  if (r.method.empty()) r.method = r.plan->method.empty() ? "plan" : r.plan->method;
  Status st;
  const FieldReader info(r.plan->info, &st, "info");
  if (!r.budget_bpw) r.budget_bpw = info.object("budget").opt<double>("bpw");
  if (r.label.empty()) {
    if (auto t = info.opt<std::string>("type")) r.label = *t, r.label_explicit = true;
  }
  if (pm) {
    PlanSize ps = plan_size(*pm, *r.plan);
    r.linear_bpw = ps.linear_bpw;
    r.file_bytes = ps.file_bytes, r.file_bytes_predicted = true;
  } else {
    const FieldReader predicted = info.object("predicted");
    r.linear_bpw = predicted.opt<double>("linear_bpw");
    if (auto fb = predicted.opt<double>("file_bytes")) r.file_bytes = uint64_t(*fb), r.file_bytes_predicted = true;
  }
  if (!st.is_ok()) return st.with_context(s.plan);
  // Allocation bpw must be known for every module (used by cosine and heatmaps).
  for (const auto& [mod, id] : r.plan->modules) {
    auto b = candidate_bpw(pm, mod, id);
    if (!b.is_ok()) return b.status().with_context(s.plan);
  }
  return Status::ok();
}

// A run's eval: its size (measured), its label when nothing else names it, its linear bpw.
Status load_run_eval(const RunSpec& s, Run& r, std::vector<std::string>* notes) {
  GAMMA_ASSIGN_OR_RETURN(r.eval, eval::EvalResult::load(s.eval));
  const std::string model_path = r.eval->model.path.value_or("");
  if (r.method.empty()) r.method = "gguf";
  if (r.label.empty() && !r.plan && !model_path.empty()) r.label = stem_of(model_path), r.label_explicit = true;
  if (auto fb = r.eval->model.file_bytes) r.file_bytes = *fb, r.file_bytes_predicted = false;
  if (!r.linear_bpw) {
    r.linear_bpw = gguf_linear_bpw(model_path);
    if (!r.linear_bpw)
      notes->push_back(fmt::format("{}: linear bpw unknown (no plan + pool, and {} is not readable here)", s.eval,
                                     model_path.empty() ? "the model" : model_path));
  }
  return Status::ok();
}

}  // namespace

Result<Inputs> load_inputs(const std::vector<std::string>& paths, const std::string& pool_dir) {
  if (paths.empty()) return Status::error("no results given");
  GAMMA_ASSIGN_OR_RETURN(Collected col, collect_inputs(paths, pool_dir));
  GAMMA_RETURN_IF_ERROR(pair_loose_files(col));
  const std::vector<RunSpec>& specs = col.specs;
  const std::string& pool = col.pool;
  const auto& loose_scores = col.loose_scores;

  Inputs in;
  if (!pool.empty()) {
    auto m = Manifest::load(pool);
    if (!m.is_ok()) return m.status().with_context("pool " + pool);
    in.pool = std::move(m).value();
  }
  const Manifest* pm = in.pool ? &*in.pool : nullptr;
  std::map<std::string, Scores> scores_cache;
  std::set<std::string> used_scores;
  for (const auto& s : specs) {
    Run r;
    r.method = s.method;
    r.label = s.label;
    r.label_explicit = !s.label.empty();
    r.budget_bpw = s.budget_bpw;
    r.plan_path = s.plan, r.eval_path = s.eval;
    if (!s.plan.empty()) GAMMA_RETURN_IF_ERROR(load_run_plan(s, pm, r));
    if (!s.eval.empty()) GAMMA_RETURN_IF_ERROR(load_run_eval(s, r, &in.notes));
    std::string sp = s.scores;
    if (sp.empty()) {
      sp = find_plan_scores(r, s.base_dir, loose_scores);
      if (sp.empty() && r.plan && r.plan->info.contains("scores"))
        in.notes.push_back(fmt::format("{}: its scores file is not found; no p/choice correlation", s.plan));
    }
    if (!sp.empty()) {
      const std::string key = canonical(sp);
      if (!scores_cache.count(key)) {
        auto sc = Scores::load(sp);
        if (!sc.is_ok()) return sc.status();
        scores_cache.emplace(key, std::move(sc).value());
      }
      r.scores = scores_cache.at(key);
      r.scores_path = sp;
      used_scores.insert(fs::path(sp).filename().string());
    }
    if (r.label.empty() && r.x_bpw()) r.label = fmt_bpw(*r.x_bpw());
    in.runs.push_back(std::move(r));
  }
  for (const auto& [name, path] : loose_scores)
    if (!used_scores.count(name)) in.notes.push_back(fmt::format("{}: no plan names these scores; ignored", path));

  // Methods in first-seen order; within a method by budget (else linear bpw, else size).
  std::map<std::string, size_t> order;
  for (const auto& r : in.runs) order.emplace(r.method, order.size());
  std::stable_sort(in.runs.begin(), in.runs.end(), [&](const Run& a, const Run& b) {
    if (a.method != b.method) return order[a.method] < order[b.method];
    const double xa = a.x_bpw().value_or(a.file_bytes ? double(*a.file_bytes) : 0);
    const double xb = b.x_bpw().value_or(b.file_bytes ? double(*b.file_bytes) : 0);
    return xa < xb;
  });
  return in;
}

namespace {

// An eval's headline figures; unset where it has none.
struct Figures {
  std::optional<double> kld, kld_se, ppl, ppl_se, top1, top1_se;
};
Figures figures(const std::optional<eval::EvalResult>& e) {
  Figures f;
  if (e && e->kld) f.kld = e->kld->mean, f.kld_se = e->kld->mean_stderr, f.top1 = e->kld->top1, f.top1_se = e->kld->top1_stderr;
  if (e && e->perplexity) f.ppl = e->perplexity->ppl, f.ppl_se = e->perplexity->ppl_stderr;
  return f;
}

std::string pm(const std::optional<double>& v, const std::optional<double>& e, int dec, double scale = 1) {
  if (!v) return "–";
  // Tiny values (a near-lossless KLD) in scientific notation rather than as zeros.
  if (*v != 0 && std::fabs(*v * scale) < std::pow(10.0, -dec + 2)) {
    if (e) return fmt::format("{:.3e} ± {:.1e}", *v * scale, *e * scale);
    return fmt::format("{:.3e}", *v * scale);
  }
  if (e) return fmt::format("{:.{}f} ± {:.{}f}", *v * scale, dec, *e * scale, dec);
  return fmt::format("{:.{}f}", *v * scale, dec);
}

std::string file_name_part(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  return s;
}

std::string run_title(const Run& r) { return r.label.empty() ? r.method : r.method + " " + r.label; }

// (layer, kind) of a module: from the pool, else from "blk.N.KIND.weight".
bool module_position(const Manifest* pool, const std::string& name, int* layer, std::string* kind) {
  if (pool) {
    if (const ModuleEntry* e = pool->find(name)) {
      *layer = e->layer, *kind = e->kind;
      return true;
    }
  }
  *layer = tensor_layer(name);
  if (*layer < 0) return false;
  std::string rest = name.substr(name.find('.', 4) + 1);
  if (rest.size() > 7 && rest.compare(rest.size() - 7, 7, ".weight") == 0) rest.resize(rest.size() - 7);
  *kind = rest;
  return true;
}

}  // namespace

// One Markdown table row.
std::string table_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& cell : cells) s += " " + cell + " |";
  return s + "\n";
}

// ---- Table: one row per run (sizes, KLD, PPL, top-1, tasks), with warnings on mixed settings ----
void write_table(const std::vector<Run>& runs, Report* out, std::string* md_out, std::vector<RunRow>* rows) {
  Report& rep = *out;
  std::vector<std::string> task_names;
  bool any_budget = false, any_label = false, any_file = false, any_lin = false, any_kld = false, any_ppl = false,
       any_top1 = false, any_pred = false;
  std::set<std::string> texts, chunk_settings, teachers;
  std::map<std::string, std::set<long>> task_items;
  for (const auto& r : runs) {
    any_budget |= bool(r.budget_bpw);
    any_label |= r.label_explicit;
    any_file |= bool(r.file_bytes);
    any_pred |= r.file_bytes && r.file_bytes_predicted;
    any_lin |= bool(r.linear_bpw);
    if (!r.eval) continue;
    const eval::EvalResult& e = *r.eval;
    const Figures f = figures(r.eval);
    any_kld |= bool(f.kld);
    any_ppl |= bool(f.ppl);
    any_top1 |= bool(f.top1);
    if (e.tasks)
      for (const auto& t : *e.tasks) {
        if (std::find(task_names.begin(), task_names.end(), t.name) == task_names.end()) task_names.push_back(t.name);
        task_items[t.name].insert(t.n ? long(*t.n) : -1);
      }
    if (f.kld) teachers.insert(e.teacher && e.teacher->sha256 ? *e.teacher->sha256 : "?");
    if (f.ppl || f.kld) {
      const auto& text = e.settings.text;
      texts.insert((text && text->sha256 ? *text->sha256 : "?").substr(0, 12));
      auto num = [](const std::optional<uint64_t>& v) { return v ? double(*v) : -1.0; };
      chunk_settings.insert(fmt::format("{} chunks of {} tokens", num(e.settings.chunks), num(e.settings.ctx)));
    }
  }
  std::string& md = *md_out;
  md = "# gamma report\n\n";
  md += fmt::format("Runs: {}, methods: {}.", runs.size(), [&] {
    std::set<std::string> m;
    for (const auto& r : runs) m.insert(r.method);
    return m.size();
  }());
  if (chunk_settings.size() == 1) md += fmt::format(" KLD and PPL over {}.", *chunk_settings.begin());
  md += "\n\n";
  if (texts.size() > 1 || chunk_settings.size() > 1) {
    const std::string w = "the evals used different texts or chunk settings: their KLD/PPL are not comparable";
    md += "**Warning:** " + w + ".\n\n";
    rep.notes.push_back(w);
  }
  if (teachers.size() > 1) {
    const std::string w = "the KLDs were measured against different teachers";
    md += "**Warning:** " + w + ".\n\n";
    rep.notes.push_back(w);
  }
  for (const auto& [name, ns] : task_items)
    if (ns.size() > 1) {
      const std::string w = fmt::format("task {} was scored on different numbers of items across runs", name);
      md += "**Warning:** " + w + ".\n\n";
      rep.notes.push_back(w);
    }
  std::vector<std::string> head = {"method"};
  if (any_budget) head.push_back("budget (bpw)");
  if (any_label) head.push_back("run");
  if (any_file) head.push_back("file (MiB)");
  if (any_lin) head.push_back("linear bpw");
  if (any_kld) head.push_back("KLD vs teacher");
  if (any_ppl) head.push_back("PPL");
  if (any_top1) head.push_back("top-1 agree (%)");
  for (const auto& t : task_names) head.push_back(t + " acc"), head.push_back(t + " acc_norm");
  md += table_row(head);
  md += table_row(std::vector<std::string>(head.size(), "---"));
  auto path = [](const std::string& p) { return p.empty() ? std::nullopt : std::optional<std::string>(p); };
  for (const auto& r : runs) {
    std::vector<std::string> c = {r.method};
    RunRow& row = rows->emplace_back();
    row.method = r.method, row.label = r.label, row.budget_bpw = r.budget_bpw;
    row.plan = path(r.plan_path), row.eval = path(r.eval_path), row.scores = path(r.scores_path);
    row.file_bytes = r.file_bytes, row.file_bytes_predicted = r.file_bytes_predicted, row.linear_bpw = r.linear_bpw;
    if (any_budget) c.push_back(r.budget_bpw ? fmt::format("{:.2f}", *r.budget_bpw) : "–");
    if (any_label) c.push_back(r.label_explicit ? r.label : "–");
    if (any_file)
      c.push_back(r.file_bytes ? fmt::format("{:.2f}{}", double(*r.file_bytes) / 1048576.0,
                                             r.file_bytes_predicted ? "*" : "")
                               : "–");
    if (any_lin) c.push_back(r.linear_bpw ? fmt::format("{:.3f}", *r.linear_bpw) : "–");
    const Figures f = figures(r.eval);
    if (any_kld) c.push_back(pm(f.kld, f.kld_se, 5));
    if (any_ppl) c.push_back(pm(f.ppl, f.ppl_se, 3));
    if (any_top1) c.push_back(pm(f.top1, f.top1_se, 2, 100));
    row.kld = f.kld, row.kld_stderr = f.kld_se, row.ppl = f.ppl, row.ppl_stderr = f.ppl_se;
    row.top1 = f.top1, row.top1_stderr = f.top1_se;
    for (const auto& name : task_names) {
      if (const eval::EvalResult::Task* t = r.eval ? r.eval->task(name) : nullptr) {
        c.push_back(pm(t->acc, t->acc_stderr, 4));
        c.push_back(pm(t->acc_norm, t->acc_norm_stderr, 4));
        row.tasks.push_back({name, t->acc, t->acc_norm, t->n ? std::optional<double>(double(*t->n)) : std::nullopt});
      } else {
        c.push_back("–"), c.push_back("–");
      }
    }
    md += table_row(c);
  }
  if (any_pred) md += "\n`*` predicted from the plan (no eval of the GGUF given); other sizes are the measured files.\n";

}

// ---- Plots: KLD vs size, type heatmaps, allocation cosine, p/choice Pearson ----
Status draw_plots(const std::vector<Run>& runs, const Manifest* pool, const Options& opt,
                  const std::vector<size_t>& planned, const std::vector<double>& corr, Report* out) {
  Report& rep = *out;
  // KLD vs file size, one series per method.
  {
    LineChart c;
    c.title = "KL divergence vs teacher by file size";
    c.x_label = "file size (MiB)";
    c.y_label = "mean KLD vs teacher";
    c.log_y = opt.log_y;
    for (const auto& r : runs) {
      const Figures f = figures(r.eval);
      if (!f.kld || !r.file_bytes) continue;
      if (c.series.empty() || c.series.back().name != r.method) c.series.push_back({r.method, {}, {}, {}, {}});
      Series& s = c.series.back();
      s.x.push_back(double(*r.file_bytes) / 1048576.0);
      s.y.push_back(*f.kld);
      s.y_err.push_back(f.kld_se.value_or(0));
      s.point_labels.push_back(r.label_explicit ? r.label : "");
    }
    if (!c.series.empty()) {
      GAMMA_ASSIGN_OR_RETURN(Image img, draw_line_chart(c));
      rep.images.emplace_back("kld_vs_size.png", std::move(img));
    } else {
      rep.notes.push_back("no eval with a KLD and a file size: no kld_vs_size.png");
    }
  }

  // Type heatmaps: layers × module kinds, one colour per candidate id (ordered by bpw).
  if (opt.heatmaps && !planned.empty()) {
    std::map<std::string, double> id_bpw;
    for (size_t i : planned)
      for (const auto& [m, id] : runs[i].plan->modules)
        if (!id_bpw.count(id)) id_bpw[id] = candidate_bpw(pool, m, id).value();
    std::vector<std::string> ids;
    for (const auto& [id, b] : id_bpw) ids.push_back(id);
    std::stable_sort(ids.begin(), ids.end(), [&](const std::string& a, const std::string& b) { return id_bpw[a] < id_bpw[b]; });
    const std::vector<Rgb> colors = ordered_palette(ids.size());
    std::vector<std::string> legend;
    for (const auto& id : ids) legend.push_back(fmt::format("{} ({:.2f} bpw)", id, id_bpw[id]));
    std::set<std::string> used_names;
    for (size_t i : planned) {
      const Run& r = runs[i];
      std::vector<std::string> kinds;
      int n_layer = 0;
      std::map<std::pair<std::string, int>, int> cell;
      for (const auto& [m, id] : r.plan->modules) {
        int layer;
        std::string kind;
        if (!module_position(pool, m, &layer, &kind)) continue;
        n_layer = std::max(n_layer, layer + 1);
        if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
        cell[{kind, layer}] = int(std::find(ids.begin(), ids.end(), id) - ids.begin());
      }
      if (kinds.empty()) {
        rep.notes.push_back(fmt::format("{}: no module names a layer; no heatmap", r.plan_path));
        continue;
      }
      // Kinds in llama.cpp's order, unknown ones after.
      std::vector<std::string> ordered;
      for (const char* k : kLinearKinds)
        if (std::find(kinds.begin(), kinds.end(), k) != kinds.end()) ordered.push_back(k);
      for (const auto& k : kinds)
        if (std::find(ordered.begin(), ordered.end(), k) == ordered.end()) ordered.push_back(k);
      CategoryHeatmap h;
      h.title = fmt::format("{}: type per layer and module{}", run_title(r),
                            r.linear_bpw ? fmt::format(" (linear {:.3f} bpw)", *r.linear_bpw) : "");
      h.x_label = "layer";
      h.y_label = "module";
      for (int l = 0; l < n_layer; ++l) h.x_labels.push_back(std::to_string(l));
      h.y_labels = ordered;
      for (const auto& k : ordered) {
        std::vector<int> rowv(n_layer, -1);
        for (int l = 0; l < n_layer; ++l)
          if (auto it = cell.find({k, l}); it != cell.end()) rowv[l] = it->second;
        h.cells.push_back(rowv);
      }
      h.categories = legend;
      h.colors = colors;
      GAMMA_ASSIGN_OR_RETURN(Image img, draw_category_heatmap(h));
      std::string name = "types-" + file_name_part(r.method + (r.label.empty() ? "" : "-" + r.label));
      for (int k = 2; used_names.count(name); ++k) name = fmt::format("{}-{}", name, k);
      used_names.insert(name);
      rep.images.emplace_back(name + ".png", std::move(img));
    }
  }

  // Cosine similarity of allocations.
  if (const auto& cos = rep.summary.cosine) {
    MatrixHeatmap h;
    h.title = "Cosine similarity of allocations (per-module bpw)";
    h.colorbar_label = "cosine";
    h.labels = cos->labels;
    h.m = cos->matrix;
    double lo = 1;
    for (const auto& rowv : cos->matrix)
      for (double x : rowv)
        if (std::isfinite(x)) lo = std::min(lo, x);
    // Allocations are positive vectors, so cosines crowd near 1: stretch the scale from
    // the smallest value (rounded down) to 1.
    h.vmin = std::min(std::floor(lo * 100) / 100, 0.99);
    h.vmax = 1;
    GAMMA_ASSIGN_OR_RETURN(Image img, draw_matrix_heatmap(h));
    rep.images.emplace_back("cosine.png", std::move(img));
  } else if (planned.size() == 1) {
    rep.notes.push_back("one plan only: no cosine.png");
  }

  // Pearson r(p, choice) per budget, one series per method (and scores target when reused).
  {
    LineChart c;
    c.title = "Stage I p vs Stage II choice: Pearson r per budget";
    c.x_label = "budget (bpw)";
    c.y_label = "Pearson r(p, one-hot choice)";
    c.y_zero_line = true;
    std::vector<std::string> order;
    std::map<std::string, Series> by;
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      if (!std::isfinite(corr[i]) || !r.x_bpw()) continue;
      std::string name = r.method;
      if (r.scores->target_bpw && r.budget_bpw && std::fabs(*r.scores->target_bpw - *r.budget_bpw) > 1e-6)
        name += fmt::format(" (scores @ {:.2f} bpw)", *r.scores->target_bpw);
      if (!by.count(name)) order.push_back(name), by[name].name = name;
      by[name].x.push_back(*r.x_bpw());
      by[name].y.push_back(corr[i]);
    }
    for (const auto& n : order) c.series.push_back(by[n]);
    if (!c.series.empty()) {
      GAMMA_ASSIGN_OR_RETURN(Image img, draw_line_chart(c));
      rep.images.emplace_back("pearson_p_choice.png", std::move(img));
    } else if (!planned.empty()) {
      rep.notes.push_back("no plan with scores holding p: no pearson_p_choice.png");
    }
  }
  return Status::ok();
}

Result<Report> build_report(const Inputs& in, const Options& opt) {
  Report rep;
  rep.notes = in.notes;
  const Manifest* pool = in.pool ? &*in.pool : nullptr;
  const auto& runs = in.runs;

  std::string md;
  std::vector<RunRow> rows;
  write_table(runs, &rep, &md, &rows);

  // ---- Allocation analyses: cosine across plans, p/choice correlation ----
  std::vector<size_t> planned;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].plan) planned.push_back(i);
  std::vector<std::string> modules;  // allocation vector order
  if (pool) {
    for (const auto& e : pool->modules) modules.push_back(e.name);
  } else {
    std::set<std::string> all;
    for (size_t i : planned)
      for (const auto& [m, id] : runs[i].plan->modules) all.insert(m);
    modules.assign(all.begin(), all.end());
  }
  std::vector<std::vector<double>> alloc;
  for (size_t i : planned) {
    std::vector<double> v(modules.size(), NAN);
    for (size_t k = 0; k < modules.size(); ++k) {
      auto it = runs[i].plan->modules.find(modules[k]);
      if (it != runs[i].plan->modules.end()) v[k] = candidate_bpw(pool, modules[k], it->second).value();
    }
    alloc.push_back(std::move(v));
  }
  std::vector<double> corr(runs.size(), NAN);
  for (size_t i : planned)
    if (runs[i].scores && !runs[i].scores->p.empty()) corr[i] = choice_correlation(*runs[i].plan, runs[i].scores->p);

  std::optional<Cosine> cosine;
  if (!planned.empty()) {
    md += "\n## Allocations\n\n";
    md += table_row({"method", "run", "linear bpw", "types (modules)", "r(p, choice)"});
    md += table_row({"---", "---", "---", "---", "---"});
    for (size_t i : planned) {
      const Run& r = runs[i];
      std::map<std::string, int> count;
      std::map<std::string, double> bpw_of;
      for (const auto& [m, id] : r.plan->modules) {
        ++count[id];
        if (!bpw_of.count(id)) { auto b = candidate_bpw(pool, m, id); bpw_of[id] = b.is_ok() ? *b : 0; }
      }
      std::vector<std::pair<double, std::string>> by_bpw;
      for (const auto& [id, n] : count) by_bpw.push_back({bpw_of[id], id});
      std::sort(by_bpw.begin(), by_bpw.end());
      std::string types;
      for (const auto& [b, id] : by_bpw) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", id, count[id]);
      md += table_row({r.method, r.label.empty() ? "–" : r.label, r.linear_bpw ? fmt::format("{:.3f}", *r.linear_bpw) : "–",
                 types, std::isfinite(corr[i]) ? fmt::format("{:.4f}", corr[i]) : "–"});
      rows[i].types = std::map<std::string, uint64_t>(count.begin(), count.end());
      if (std::isfinite(corr[i])) rows[i].pearson_p_choice = corr[i];
    }
    if (planned.size() >= 2) {
      cosine = Cosine{{}, {}, "per-module bits per weight of the chosen candidate"};
      for (size_t a = 0; a < planned.size(); ++a) {
        cosine->labels.push_back(run_title(runs[planned[a]]));
        auto& rowv = cosine->matrix.emplace_back();
        for (size_t b = 0; b < planned.size(); ++b) rowv.push_back(cosine_similarity(alloc[a], alloc[b]));
      }
    }
  }

  rep.table_md = md;
  if (pool) rep.summary.pool = pool->dir;
  rep.summary.runs = std::move(rows);
  rep.summary.cosine = std::move(cosine);

  GAMMA_RETURN_IF_ERROR(draw_plots(runs, pool, opt, planned, corr, &rep));
  return rep;
}

Result<std::vector<std::string>> write_report(const Report& r, const std::string& outdir) {
  std::error_code ec;
  if (fs::exists(outdir, ec) && !fs::is_directory(outdir, ec))
    return Status::errorf("{}: exists and is not a directory", outdir);
  fs::create_directories(outdir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", outdir, ec.message());
  std::vector<std::string> written;
  const std::string table = (fs::path(outdir) / "table.md").string();
  GAMMA_RETURN_IF_ERROR(write_file_atomic(table, r.table_md));
  written.push_back(table);
  const std::string summary = (fs::path(outdir) / "report.json").string();
  GAMMA_RETURN_IF_ERROR(write_json(summary, r.summary.to_json()));
  written.push_back(summary);
  for (const auto& [name, img] : r.images) {
    const std::string p = (fs::path(outdir) / name).string();
    GAMMA_RETURN_IF_ERROR(img.write_png(p));
    written.push_back(p);
  }
  return written;
}

}  // namespace gm::report
