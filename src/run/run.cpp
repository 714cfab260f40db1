#include "run/run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "fetch/fetch.h"
#include "gguf_model/model.h"
#include "plan/plan.h"
#include "pool/manifest.h"
#include "util/files.h"
#include "util/json.h"
#include "util/threads.h"

namespace fs = std::filesystem;

namespace gm {

const std::vector<StandardMix>& standard_mixes() {
  // llama-quantize's table: K and legacy mixes as " 2.96G, +3.5199 ppl @ Llama-3-8B"
  // (bpw = G * 2^30 * 8 / 8.03e9), IQ mixes as " 3.44 bpw quantization". IQ1_S..IQ2_S need an
  // imatrix (llama-quantize refuses them without one).
  static const std::vector<StandardMix> mixes = [] {
    const double gib = 1073741824.0 * 8 / 8.03e9;
    std::vector<StandardMix> m = {
        {"IQ1_S", 1.56, true},         {"IQ1_M", 1.75, true},         {"IQ2_XXS", 2.06, true},
        {"IQ2_XS", 2.31, true},        {"IQ2_S", 2.5, true},          {"IQ2_M", 2.7, false},
        {"Q2_K", 2.96 * gib, false},   {"IQ3_XXS", 3.06, false},      {"IQ3_XS", 3.3, false},
        {"Q3_K_S", 3.41 * gib, false}, {"IQ3_S", 3.44, false},        {"IQ3_M", 3.66, false},
        {"Q3_K_M", 3.74 * gib, false}, {"Q3_K_L", 4.03 * gib, false}, {"IQ4_XS", 4.25, false},
        {"Q4_0", 4.34 * gib, false},   {"Q4_K_S", 4.37 * gib, false}, {"IQ4_NL", 4.5, false},
        {"Q4_K_M", 4.58 * gib, false}, {"Q4_1", 4.78 * gib, false},   {"Q5_0", 5.21 * gib, false},
        {"Q5_K_S", 5.21 * gib, false}, {"Q5_K_M", 5.33 * gib, false}, {"Q5_1", 5.65 * gib, false},
        {"Q6_K", 6.14 * gib, false},   {"Q8_0", 7.96 * gib, false}};
    return m;
  }();
  return mixes;
}

int nearest_mix(double file_bpw, bool have_imatrix) {
  const auto& m = standard_mixes();
  int best = -1;
  for (int i = 0; i < int(m.size()); ++i)
    if ((have_imatrix || !m[i].needs_imatrix) &&
        (best < 0 || std::fabs(m[i].nominal_bpw - file_bpw) < std::fabs(m[best].nominal_bpw - file_bpw)))
      best = i;
  return best;
}

int next_mix_to_try(double file_bpw, const std::vector<double>& made, bool have_imatrix) {
  bool below = false, above = false, any = false;
  for (double b : made)
    if (b >= 0) {
      any = true;
      below = below || b <= file_bpw;
      above = above || b >= file_bpw;
    }
  if (!any) return nearest_mix(file_bpw, have_imatrix);
  if (below && above) return -1;
  // Real sizes need not follow the nominal order (a k-quant mix falls back to other types on
  // rows k-quants cannot hold), so take the nominally nearest untried mix on the missing side.
  const auto& m = standard_mixes();
  int next = -1;
  for (int i = 0; i < int(m.size()); ++i) {
    if (made[size_t(i)] >= 0 || (m[i].needs_imatrix && !have_imatrix) ||
        (below ? m[i].nominal_bpw < file_bpw : m[i].nominal_bpw > file_bpw))
      continue;
    if (next < 0 || std::fabs(m[i].nominal_bpw - file_bpw) < std::fabs(m[next].nominal_bpw - file_bpw)) next = i;
  }
  return next;
}

namespace {

// Runs argv[0] with inherited stdout/stderr and waits; a non-zero exit fails the run with the
// step's name (the child has already printed its own one-line error).
Status run_step(const std::string& step, const std::vector<std::string>& argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::errorf("{}: cannot start {}: {}", step, argv[0], std::strerror(errno));
  if (pid == 0) {
    ::execv(args[0], args.data());
    std::fprintf(stderr, "gamma: error: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Status::errorf("{}: waitpid: {}", step, std::strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
  if (WIFSIGNALED(status)) return Status::errorf("{} failed: {} killed by signal {}", step, argv[0], WTERMSIG(status));
  return Status::errorf("{} failed ({} exited with {})", step, argv[0], WEXITSTATUS(status));
}

// Like run_step, for a llama.cpp tool whose chatter goes to LOG (shown only on failure).
Status run_tool(const std::string& step, const std::vector<std::string>& argv, const std::string& log) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";  // paths are ours: no single quotes
  cmd += "> '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc == 0) return Status::ok();
  return Status::errorf("{} failed ({} exited with {}; its log: {})", step, argv[0],
                        WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, log);
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// True when `target` exists and is at least as new as `source`.
bool newer(const std::string& target, const std::string& source) {
  std::error_code e1, e2;
  const auto t = fs::last_write_time(target, e1), s = fs::last_write_time(source, e2);
  return !e1 && !e2 && t >= s;
}

std::string bpw_tag(double bpw) { return fmt::format("{:.3g}", bpw); }

struct FileStats {
  uint64_t bytes = 0;
  double bpw = 0;  // whole file, bits per model weight
};

Result<FileStats> file_stats(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(auto m, Model::open(path));
  double n = 0;
  for (const auto& t : m->tensors()) n += double(t.n_elements());
  return FileStats{m->file_size(), n > 0 ? 8.0 * double(m->file_size()) / n : 0};
}

}  // namespace

// A one-step-cheaper type for the output head (or the tied embedding) that its rows fit, or "".
static std::string cheaper_head_type(const Manifest& m, const std::string& head, const std::string& current) {
  static const std::map<std::string, std::string> kStep = {
      {"Q8_0", "Q5_1"}, {"Q6_K", "Q5_K"}, {"Q5_K", "Q4_K"}, {"Q5_1", "Q4_1"}};
  auto it = kStep.find(current);
  return it != kStep.end() && check_fixed_type(m, head, it->second).is_ok() ? it->second : "";
}

Status run_pipeline(const RunOptions& o) {
  int compare_idx = -1;  // checked before any work
  if (o.compare != "auto" && o.compare != "none") {
    for (int i = 0; i < int(standard_mixes().size()); ++i)
      if (o.compare == standard_mixes()[i].name) compare_idx = i;
    if (compare_idx < 0)
      return Status::errorf("--compare {}: not a llama.cpp standard mix (IQ1_S, ..., IQ4_NL, Q2_K, ..., Q8_0)", o.compare);
    if (standard_mixes()[compare_idx].needs_imatrix && o.imatrix == "none")
      return Status::errorf("--compare {}: llama-quantize makes it only with an imatrix (not with --imatrix none)", o.compare);
  }
  const std::string G = o.gamma_exe;
  const std::string data = o.data_dir.empty() ? shared_data_dir() : o.data_dir;
  const std::string T = std::to_string(resolve_threads(o.threads));
  const std::string W = o.work;
  std::error_code ec;
  fs::create_directories(W, ec);
  if (ec) return Status::errorf("cannot create work directory {}: {}", W, ec.message());
  if (::access(W.c_str(), W_OK) != 0) return Status::errorf("cannot write to work directory {}", W);
  const std::string eval_text = o.eval_text.empty() ? data + "/text/wiki.test.raw" : o.eval_text;
  const std::string valid_text = o.valid_text.empty() ? data + "/text/wiki.valid.tokens" : o.valid_text;
  const std::string calib = data + "/text/war-and-peace.txt";
  for (const auto& f : {eval_text, valid_text, calib})
    if (::access(f.c_str(), R_OK) != 0) return Status::errorf("cannot read {}: {}", f, std::strerror(errno));
  auto say = [](const std::string& s) { std::printf("== %s\n", s.c_str()); std::fflush(stdout); };

  // 1. The model.
  std::string model = o.model;
  if (!exists(model) || fs::is_directory(model)) {
    say("fetch " + o.model);
    GAMMA_ASSIGN_OR_RETURN(model, fetch_model(o.model));
  }
  std::string types_csv;  // empty: gamma pool's measured default set ("auto")
  for (const auto& t : o.types) types_csv += (types_csv.empty() ? "" : ",") + t;
  if (types_csv.empty()) types_csv = "auto";

  // 2. The teacher: the model dequantized to F32 (when the source is quantized, the best
  //    reference there is; reported as such).
  const std::string teacher = W + "/teacher-f32.gguf";
  if (!exists(teacher)) {
    say("dequantize -> " + teacher);
    GAMMA_RETURN_IF_ERROR(run_step("dequantize", {G, "dequantize", model, "--type", "f32", "-o", teacher}));
  }

  // 3. Importance matrix, shared by gamma's pool and llama-quantize's mix.
  std::string imatrix;
  if (o.imatrix == "auto") {
    imatrix = W + "/imatrix.gguf";
    if (!exists(imatrix)) {
      say(fmt::format("llama-imatrix ({} chunks of {} tokens of {}) -> {}", o.imatrix_chunks, o.eval_ctx,
                      fs::path(calib).filename().string(), imatrix));
      const std::string tmp = W + "/imatrix.partial.gguf";
      GAMMA_RETURN_IF_ERROR(run_tool("imatrix",
          {o.llama_bin + "/llama-imatrix", "-m", model, "-f", calib, "-c", std::to_string(o.eval_ctx), "--chunks",
           std::to_string(o.imatrix_chunks), "-t", T, "-o", tmp}, W + "/imatrix.log"));
      if (std::rename(tmp.c_str(), imatrix.c_str()) != 0) return Status::errorf("cannot write {}", imatrix);
    }
  } else if (o.imatrix != "none") {
    imatrix = o.imatrix;
    if (::access(imatrix.c_str(), R_OK) != 0) return Status::errorf("cannot read {}: {}", imatrix, std::strerror(errno));
  }

  // 4. Pool (resumes by itself).
  const std::string pool = W + "/pool";
  say("pool " + types_csv + " -> " + pool);
  std::vector<std::string> pool_cmd = {G, "pool", model, "--types", types_csv, "-o", pool, "-t", T};
  if (!imatrix.empty()) pool_cmd.insert(pool_cmd.end(), {"--imatrix", imatrix});
  GAMMA_RETURN_IF_ERROR(run_step("pool", pool_cmd));

  // 5. Stage I at the target (or scores given), 6. Stage II, 7. emit.
  const std::string tag = bpw_tag(o.bpw);
  std::string scores = o.scores;
  if (scores.empty()) {
    scores = W + "/scores-" + tag + ".json";
    if (!exists(scores)) {
      say("learn -> " + scores);
      GAMMA_RETURN_IF_ERROR(run_step("learn",
          {G, "learn", pool, "--teacher", teacher, "--bpw", tag, "--steps", std::to_string(o.steps),
           "--layers-per-step", std::to_string(o.layers_per_step), "--calib-tokens", std::to_string(o.calib_tokens),
           "-t", T, "-o", scores}));
    }
  }
  // 6-7. Stage II, chosen on validation text: the budget's file size is the one the linear
  //    budget gives with llama.cpp's default head/embedding types; at that size, every scorer
  //    (GAMMA's scores as size-weighted log p spending the budget, the static proxy) with the
  //    default and with a one-step-cheaper output head is solved, emitted and measured
  //    against the teacher on the validation text; the best becomes gamma's file.
  const std::string plan = W + "/plan-" + tag + ".json", out = W + "/gamma-" + tag + ".gguf";
  const std::string choice_path = W + "/choice-" + tag + ".json";
  if (!newer(choice_path, scores) || !exists(out) || !exists(plan)) {
    const std::string sized = W + "/plan-" + tag + "-sized.json";
    GAMMA_RETURN_IF_ERROR(run_step("solve", {G, "solve", "--score-from-manifest", "--pool", pool, "--bpw", tag, "-o", sized}));
    GAMMA_ASSIGN_OR_RETURN(json sj, read_json(sized, "gamma.plan", 1));
    const std::string size = std::to_string(sj["info"]["predicted"]["file_bytes"].get<uint64_t>());
    GAMMA_ASSIGN_OR_RETURN(Manifest man, Manifest::load(pool));
    const std::string head = output_head(man);
    std::vector<std::string> heads = {""};
    if (auto cheaper = cheaper_head_type(man, head, sj["fixed"].value(head, "")); !cheaper.empty()) heads.push_back(cheaper);
    const std::vector<std::pair<std::string, std::vector<std::string>>> scorers = {
        {"gamma", {"--scores", scores, "--transform", "size-log", "--fill", "0.995"}}, {"static", {"--score-from-manifest"}}};
    const std::string vbase = W + fmt::format("/teacher-logits-valid-c{}-n{}.kld", o.eval_ctx, o.eval_chunks);
    json tried = json::array();
    double best = INFINITY;
    for (const auto& [sname, sargs] : scorers)
      for (const auto& h : heads) {
        const std::string name = sname + (h.empty() ? "" : "-" + head.substr(0, head.find('.')) + "-" + h);
        const std::string cp = W + "/plan-" + tag + "-" + name + ".json", cg = W + "/cand-" + tag + "-" + name + ".gguf";
        say(fmt::format("solve + emit {} at {} bytes, eval on {}", name, size, fs::path(valid_text).filename().string()));
        std::vector<std::string> cmd = {G, "solve", "--pool", pool, "--size", size, "-o", cp};
        cmd.insert(cmd.end(), sargs.begin(), sargs.end());
        if (!h.empty()) cmd.insert(cmd.end(), {"--fixed", head + "=" + h});
        GAMMA_RETURN_IF_ERROR(run_step("solve", cmd));
        GAMMA_RETURN_IF_ERROR(run_step("emit", {G, "emit", pool, cp, "-o", cg}));
        const std::string ej = cg.substr(0, cg.size() - 5) + ".valid.json";
        GAMMA_RETURN_IF_ERROR(run_step("eval", {G, "eval", cg, "--teacher", teacher, "--kld-base", vbase, "--text", valid_text,
                                                "--ctx", std::to_string(o.eval_ctx), "--chunks", std::to_string(o.eval_chunks),
                                                "-t", T, "-q", "-o", ej}));
        GAMMA_ASSIGN_OR_RETURN(json e, read_json(ej, "gamma.eval", 1));
        const double kld = e["kld"]["mean"].get<double>();
        tried.push_back({{"name", name}, {"plan", cp}, {"valid_kld", kld}, {"valid_kld_stderr", e["kld"]["stderr"]}});
        if (kld < best) {
          best = kld;
          std::error_code rec;
          fs::copy_file(cp, plan, fs::copy_options::overwrite_existing, rec);
          if (rec || std::rename(cg.c_str(), out.c_str()) != 0) return Status::errorf("cannot write {}", out);
        } else {
          fs::remove(cg);
        }
      }
    json ch = json_header("gamma.run.choice", 1);
    ch["size"] = std::stoull(size);
    ch["validation"] = {{"text", valid_text}, {"ctx", o.eval_ctx}, {"chunks", o.eval_chunks}};
    ch["tried"] = tried;
    for (const auto& t : tried)
      if (t["valid_kld"].get<double>() == best) ch["chosen"] = t["name"];
    GAMMA_RETURN_IF_ERROR(write_json(choice_path, ch));
    say(fmt::format("chosen on validation: {} (KLD {:.6f})", ch["chosen"].get<std::string>(), best));
  }
  GAMMA_ASSIGN_OR_RETURN(FileStats mine, file_stats(out));

  // 8. The llama.cpp standard mix nearest in size, from the same teacher and imatrix.
  struct Row {
    std::string label, path;
    FileStats st;
  };
  std::vector<Row> rows = {{"gamma " + tag + " bpw", out, mine}};
  if (o.compare != "none") {
    const auto& mixes = standard_mixes();
    std::vector<double> made(mixes.size(), -1.0);
    auto make = [&](int i) -> Status {
      const std::string path = W + "/llama-" + mixes[i].name + ".gguf";
      if (!exists(path)) {
        say(std::string("llama-quantize ") + mixes[i].name + " -> " + path);
        const std::string tmp = W + "/llama-" + mixes[i].name + ".partial.gguf";
        std::vector<std::string> cmd = {o.llama_bin + "/llama-quantize"};
        if (!imatrix.empty()) cmd.insert(cmd.end(), {"--imatrix", imatrix});
        cmd.insert(cmd.end(), {teacher, tmp, mixes[i].name, T});
        GAMMA_RETURN_IF_ERROR(run_tool("llama-quantize", cmd, W + "/llama-" + mixes[i].name + ".log"));
        if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::errorf("cannot write {}", path);
      }
      GAMMA_ASSIGN_OR_RETURN(FileStats st, file_stats(path));
      made[i] = st.bpw;
      return Status::ok();
    };
    if (o.compare == "auto") {
      const bool have_im = !imatrix.empty();
      for (int tries = 0, i = nearest_mix(mine.bpw, have_im); i >= 0 && tries < 6;
           ++tries, i = next_mix_to_try(mine.bpw, made, have_im))
        GAMMA_RETURN_IF_ERROR(make(i));
      // The nearest mix no larger and the nearest no smaller than gamma's file (one row when
      // only one side exists within the tries).
      int lo = -1, hi = -1;
      for (int i = 0; i < int(made.size()); ++i) {
        if (made[i] < 0) continue;
        if (made[i] <= mine.bpw && (lo < 0 || made[i] > made[lo])) lo = i;
        if (made[i] >= mine.bpw && (hi < 0 || made[i] < made[hi])) hi = i;
      }
      for (int i : {lo, hi})
        if (i >= 0 && !(i == hi && hi == lo)) {
          const std::string p = W + "/llama-" + mixes[i].name + ".gguf";
          GAMMA_ASSIGN_OR_RETURN(FileStats st, file_stats(p));
          rows.push_back({std::string("llama.cpp ") + mixes[i].name, p, st});
        }
    } else {
      GAMMA_RETURN_IF_ERROR(make(compare_idx));
      const int idx = compare_idx;
      const std::string p = W + "/llama-" + mixes[idx].name + ".gguf";
      GAMMA_ASSIGN_OR_RETURN(FileStats st, file_stats(p));
      rows.push_back({std::string("llama.cpp ") + mixes[idx].name, p, st});
    }
  }

  // 9. Both against the teacher on the same chunks; the teacher's log-probs computed once.
  const std::string base = W + fmt::format("/teacher-logits-c{}-n{}.kld", o.eval_ctx, o.eval_chunks);
  json summary = json_header("gamma.run", 1);
  summary["model"] = model;
  summary["teacher"] = teacher;
  summary["bpw_target"] = o.bpw;
  summary["imatrix"] = imatrix;
  summary["eval"] = {{"text", eval_text}, {"ctx", o.eval_ctx}, {"chunks", o.eval_chunks}};
  summary["rows"] = json::array();
  for (auto& r : rows) {
    const std::string ej = r.path.substr(0, r.path.size() - 5) + fmt::format(".eval-c{}-n{}.json", o.eval_ctx, o.eval_chunks);
    // An evaluation is reused only for the very file it measured (a re-solved plan may differ).
    GAMMA_ASSIGN_OR_RETURN(std::string sha, sha256_file_cached(r.path));
    bool fresh = false;
    if (auto prev = read_json(ej, "gamma.eval", 1); prev.is_ok())
      fresh = prev.value()["model"].value("sha256", "") == sha && prev.value().contains("kld");
    if (!fresh) {
      say("eval " + fs::path(r.path).filename().string() + " vs teacher");
      GAMMA_RETURN_IF_ERROR(run_step("eval",
          {G, "eval", r.path, "--teacher", teacher, "--kld-base", base, "--text", eval_text, "--ctx",
           std::to_string(o.eval_ctx), "--chunks", std::to_string(o.eval_chunks), "-t", T, "-q", "-o", ej}));
    }
    GAMMA_ASSIGN_OR_RETURN(json e, read_json(ej, "gamma.eval", 1));
    summary["rows"].push_back({{"label", r.label}, {"path", r.path}, {"file_bytes", r.st.bytes}, {"bpw_file", r.st.bpw},
                               {"kld_mean", e["kld"]["mean"]}, {"kld_stderr", e["kld"]["stderr"]},
                               {"top1", e["kld"]["top1"]}, {"ppl", e["perplexity"]["ppl"]},
                               {"ppl_stderr", e["perplexity"]["ppl_stderr"]}, {"eval", ej}});
  }
  GAMMA_RETURN_IF_ERROR(write_json(W + "/run.json", summary));

  std::printf("\n%s vs its F32 dequantization (teacher), %s, %d chunks of %d:\n",
              fs::path(model).filename().c_str(), fs::path(eval_text).filename().c_str(), o.eval_chunks, o.eval_ctx);
  std::printf("  %-22s %14s %9s %20s %8s %9s\n", "model", "file bytes", "bpw", "KLD vs teacher", "top-1", "PPL");
  for (const auto& r : summary["rows"])
    std::printf("  %-22s %14llu %9.4f %11.6f ± %.6f %7.2f%% %9.4f\n", r["label"].get<std::string>().c_str(),
                (unsigned long long)r["file_bytes"].get<uint64_t>(), r["bpw_file"].get<double>(),
                r["kld_mean"].get<double>(), r["kld_stderr"].get<double>(), 100 * r["top1"].get<double>(),
                r["ppl"].get<double>());
  std::printf("summary: %s\n", (W + "/run.json").c_str());
  return Status::ok();
}

}  // namespace gm
