#include "search/search.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include <fmt/format.h>

#include "eval/plan_kld.h"
#include "pool/manifest.h"
#include "util/files.h"
#include "util/json.h"

namespace gm::search {
namespace {

namespace fs = std::filesystem;
constexpr const char* kStateSchema = "gamma.search.state";
constexpr int kStateVersion = 1;

using Assignment = std::vector<int>;  // per manifest module: index into its candidates (bytes ascending)

struct Ctx {
  const SearchOptions& o;
  const Manifest& m;
  std::string child_gguf;
  int evaluations = 0;
};

Plan to_plan(const Manifest& m, const Assignment& a, const std::map<std::string, std::string>& fixed) {
  Plan p;
  p.model_fingerprint = m.model_fingerprint;
  p.method = "search";
  p.fixed = fixed;
  for (size_t i = 0; i < m.modules.size(); ++i) p.modules[m.modules[i].name] = m.modules[i].candidates[a[i]].id;
  return p;
}

Result<Assignment> to_assignment(const Manifest& m, const std::map<std::string, std::string>& modules,
                                 const std::string& what) {
  Assignment a(m.modules.size());
  for (size_t i = 0; i < m.modules.size(); ++i) {
    const auto& e = m.modules[i];
    auto it = modules.find(e.name);
    if (it == modules.end()) return Status::errorf(Status::Code::kCorrupt, "{} has no candidate for module {}", what, e.name);
    int k = -1;
    for (size_t j = 0; j < e.candidates.size(); ++j)
      if (e.candidates[j].id == it->second) k = int(j);
    if (k < 0) return Status::errorf(Status::Code::kCorrupt, "{}: module {} has no candidate {} in the pool", what, e.name, it->second);
    a[i] = k;
  }
  return a;
}

// KLD vs the teacher of the plan's file on the first `chunks` chunks of the calibration text.
Result<double> fitness(Ctx& c, const Plan& p, int chunks) {
  GAMMA_ASSIGN_OR_RETURN(double k, eval::plan_kld({c.o.pool, c.child_gguf, c.o.teacher, c.o.kld_base, c.o.text, c.o.n_ctx,
                                                   chunks, c.o.threads}, p));
  ++c.evaluations;
  return k;
}

// A level switch: raise 1..max_switches random modules one candidate, then lower random other
// modules one candidate until the file fits the budget. False when no such child exists.
bool mutate(const Manifest& m, const Assignment& parent, uint64_t parent_bytes, uint64_t size, int max_switches,
            std::mt19937_64& rng, Assignment* child, uint64_t* bytes) {
  const size_t n = m.modules.size();
  auto fb = [&](size_t i, int k) { return int64_t(m.modules[i].candidates[k].file_bytes); };
  for (int attempt = 0; attempt < 64; ++attempt) {
    Assignment a = parent;
    int64_t b = int64_t(parent_bytes);
    std::set<size_t> raised;
    const int want = 1 + int(rng() % uint64_t(max_switches));
    for (int t = 0; t < 256 && int(raised.size()) < want; ++t) {
      const size_t i = rng() % n;
      if (raised.count(i) || a[i] + 1 >= int(m.modules[i].candidates.size())) continue;
      b += fb(i, a[i] + 1) - fb(i, a[i]);
      ++a[i];
      raised.insert(i);
    }
    if (raised.empty()) return false;
    std::vector<size_t> lowerable;
    while (b > int64_t(size)) {
      lowerable.clear();
      for (size_t i = 0; i < n; ++i)
        if (!raised.count(i) && a[i] > 0) lowerable.push_back(i);
      if (lowerable.empty()) break;
      const size_t i = lowerable[rng() % lowerable.size()];
      b -= fb(i, a[i]) - fb(i, a[i] - 1);
      --a[i];
    }
    if (b > int64_t(size) || a == parent) continue;
    *child = std::move(a);
    *bytes = uint64_t(b);
    return true;
  }
  return false;
}

Status check_options(const SearchOptions& o) {
  if (o.size == 0) return Status::error("--size: give the budget (the whole file, e.g. 752880576 or 718MiB)");
  if (o.init.empty()) return Status::error("--init: give at least one plan to start from (e.g. gamma solve --score-from-manifest --size S)");
  if (o.chunks < 1 || o.small_chunks < 1 || o.small_chunks > o.chunks)
    return Status::errorf("--small-chunks ({}) must be in [1, --chunks ({})]", o.small_chunks, o.chunks);
  if (o.offspring < 1) return Status::errorf("--offspring must be at least 1 (got {})", o.offspring);
  if (o.max_switches < 1) return Status::errorf("--max-switches must be at least 1 (got {})", o.max_switches);
  if (o.n_ctx < 8) return Status::errorf("--ctx must be at least 8 (got {})", o.n_ctx);
  if (o.generations < 0 || o.wall_seconds < 0 || (o.generations == 0 && o.wall_seconds == 0))
    return Status::error("give a limit: --generations N and/or --wall-time SECONDS (both > 0)");
  if (!file_exists(o.teacher)) return Status::errorf("--teacher {} does not exist", o.teacher);
  GAMMA_RETURN_IF_ERROR(check_text_file(o.text, "--calib"));
  return check_writable_dir(o.out);
}

}  // namespace

Result<SearchResult> run_search(const SearchOptions& o) {
  GAMMA_RETURN_IF_ERROR(check_options(o));
  GAMMA_ASSIGN_OR_RETURN(Manifest m, Manifest::load(o.pool));
  GAMMA_ASSIGN_OR_RETURN(OutputLock lock, OutputLock::take(o.out, "gamma search"));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = o.tmp_dir.empty() ? fs::path(o.out).parent_path().string() : o.tmp_dir;
  Ctx c{o, m, (fs::path(dir.empty() ? "." : dir) / (fs::path(o.out).filename().string() + ".child.gguf")).string()};

  GAMMA_ASSIGN_OR_RETURN(std::string manifest_sha, sha256_file(o.pool + "/manifest.json"));
  const json config = {{"manifest_sha256", manifest_sha}, {"teacher", fs::absolute(o.teacher).string()},
                       {"text", fs::absolute(o.text).string()}, {"ctx", o.n_ctx}, {"chunks", o.chunks},
                       {"small_chunks", o.small_chunks}, {"offspring", o.offspring},
                       {"max_switches", o.max_switches}, {"size", o.size}, {"seed", o.seed}, {"init", o.init}};
  const std::string state_path = o.out + ".state.json";

  SearchResult r;
  Assignment parent;
  std::map<std::string, std::string> fixed;
  double pf = 0, ps = 0, spent_before = 0;
  int gen = 0;
  json history = json::array();
  if (file_exists(state_path)) {
    GAMMA_ASSIGN_OR_RETURN(json s, read_json(state_path, kStateSchema, kStateVersion));
    for (const auto& [k, v] : config.items())
      if (!s["config"].contains(k) || s["config"][k] != v)
        return Status::errorf("{} is from another search ({} differs); remove it or choose another -o", state_path, k);
    GAMMA_ASSIGN_OR_RETURN(parent, to_assignment(m, s["parent"].get<std::map<std::string, std::string>>(), state_path));
    fixed = s["fixed"].get<std::map<std::string, std::string>>();
    pf = s["parent_kld"].get<double>(), ps = s["parent_kld_small"].get<double>();
    gen = s["generation"].get<int>(), r.accepted = s["accepted"].get<int>();
    c.evaluations = s["evaluations"].get<int>(), spent_before = s["seconds"].get<double>();
    history = s["history"];
    r.resumed_from = gen;
  } else {
    bool first = true;
    for (const auto& path : o.init) {
      GAMMA_ASSIGN_OR_RETURN(Plan p, Plan::load(path));
      GAMMA_RETURN_IF_ERROR(p.validate(m));
      const uint64_t b = plan_size(m, p).file_bytes;
      if (b > o.size) return Status::errorf("--init {} makes a {}-byte file, above the budget of {} bytes", path, b, o.size);
      GAMMA_ASSIGN_OR_RETURN(double f, fitness(c, p, o.chunks));
      if (first || f < pf) {
        GAMMA_ASSIGN_OR_RETURN(parent, to_assignment(m, p.modules, path));
        fixed = p.fixed, pf = f, first = false;
      }
    }
    GAMMA_ASSIGN_OR_RETURN(ps, fitness(c, to_plan(m, parent, fixed), o.small_chunks));
  }
  auto spent = [&] {
    return spent_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto save_state = [&]() -> Status {
    json s = json_header(kStateSchema, kStateVersion);
    s["config"] = config;
    s["generation"] = gen, s["accepted"] = r.accepted, s["evaluations"] = c.evaluations, s["seconds"] = spent();
    s["parent"] = to_plan(m, parent, fixed).modules, s["fixed"] = fixed;
    s["parent_kld"] = pf, s["parent_kld_small"] = ps;
    s["history"] = history;
    return write_json(state_path, s);
  };
  if (r.resumed_from < 0) GAMMA_RETURN_IF_ERROR(save_state());

  uint64_t parent_bytes = plan_size(m, to_plan(m, parent, fixed)).file_bytes;
  while ((o.generations == 0 || gen < o.generations) && (o.wall_seconds == 0 || spent() < o.wall_seconds)) {
    ++gen;
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull ^ uint64_t(gen));
    Assignment best;
    uint64_t best_bytes = 0;
    double best_small = 0;
    for (int k = 0; k < o.offspring; ++k) {
      Assignment child;
      uint64_t b = 0;
      if (!mutate(m, parent, parent_bytes, o.size, o.max_switches, rng, &child, &b)) break;
      GAMMA_ASSIGN_OR_RETURN(double f, fitness(c, to_plan(m, child, fixed), o.small_chunks));
      if (best.empty() || f < best_small) best = std::move(child), best_bytes = b, best_small = f;
    }
    if (best.empty()) {
      --gen;
      if (!o.quiet) std::fprintf(stderr, "gamma search: no change of the parent fits the budget; stopping\n");
      break;
    }
    GAMMA_ASSIGN_OR_RETURN(double full, fitness(c, to_plan(m, best, fixed), o.chunks));
    const bool accepted = full < pf;
    if (accepted) parent = std::move(best), parent_bytes = best_bytes, pf = full, ps = best_small, ++r.accepted;
    history.push_back({{"generation", gen}, {"child_kld_small", best_small}, {"child_kld", full},
                       {"accepted", accepted}, {"parent_kld", pf}, {"seconds", spent()}});
    GAMMA_RETURN_IF_ERROR(save_state());
    if (!o.quiet)
      std::fprintf(stderr, "gamma search: generation %d: best child KLD %.6f (%s), parent %.6f; %d evaluations, %.0f s\n", gen,
                   full, accepted ? "accepted" : "kept the parent", pf, c.evaluations, spent());
  }

  r.plan = to_plan(m, parent, fixed);
  const PlanSize sz = plan_size(m, r.plan);
  r.fitness = pf, r.generations = gen, r.evaluations = c.evaluations, r.seconds = spent();
  r.plan.info = {{"allocator", "evolutionary search (1+lambda), level-switch mutations within the byte budget"},
                 {"budget", {{"file_bytes", o.size}}},
                 {"predicted", {{"file_bytes", sz.file_bytes}, {"linear_bpw", sz.linear_bpw}}},
                 {"fitness", {{"kld_mean", pf}, {"chunks", o.chunks}, {"ctx", o.n_ctx}, {"text", o.text}}},
                 {"generations", gen}, {"accepted", r.accepted}, {"evaluations", c.evaluations},
                 {"seconds", r.seconds}, {"config", config}};
  GAMMA_RETURN_IF_ERROR(r.plan.save(o.out));
  return r;
}

}  // namespace gm::search
