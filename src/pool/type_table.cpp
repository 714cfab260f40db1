#include "pool/type_table.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "util/stats.h"

namespace gm {
namespace {

struct Point {
  double bpw, rel_err;
  int64_t n_params;
};

}  // namespace

TypeTable type_table(const Manifest& m, double share) {
  std::map<std::string, std::map<std::string, Point>> per;  // type -> module -> figures
  std::vector<std::string> order;  // first seen first: ties in bpw keep the manifest's order
  for (const auto& e : m.modules)
    for (const auto& c : e.candidates)
      if (c.id.find('@') == std::string::npos && c.type != "F16") {
        if (!per.count(c.type)) order.push_back(c.type);
        per[c.type][e.name] = {c.bpw, c.rel_err, e.n_params};
      }
  TypeTable t;
  t.model = std::filesystem::path(m.model_path).filename().string();
  t.n_modules = int(m.modules.size());
  t.share = share;
  for (const auto& type : order) {
    const auto& mods = per[type];
    TypeRow r;
    r.type = type;
    r.modules = int(mods.size());
    double params = 0, bpw = 0, err = 0;
    std::vector<double> errs;
    for (const auto& [name, p] : mods) {
      params += double(p.n_params), bpw += p.bpw * double(p.n_params), err += p.rel_err * double(p.n_params);
      errs.push_back(p.rel_err);
      r.exact_copies += p.rel_err == 0.0;
    }
    r.bpw = bpw / params;
    r.rel_err_mean = err / params;
    r.rel_err_median = median(errs);
    if (auto side = read_json(m.dir + "/cand-" + type + ".json", "gamma.pool.part", 1); side.is_ok())
      if (side->contains("seconds") && (*side)["seconds"].is_number()) r.pool_seconds = (*side)["seconds"].get<double>();
    t.rows.push_back(r);
  }
  std::stable_sort(t.rows.begin(), t.rows.end(), [](const TypeRow& a, const TypeRow& b) { return a.bpw < b.bpw; });
  for (auto& r : t.rows) {
    const auto& A = per[r.type];
    for (const auto& o : t.rows) {
      if (o.type == r.type) continue;
      const auto& B = per[o.type];
      int both = 0, wins = 0;
      for (const auto& [name, a] : A)
        if (auto it = B.find(name); it != B.end()) {
          ++both;
          wins += it->second.bpw <= a.bpw && it->second.rel_err <= a.rel_err;
        }
      if (both > 0 && wins >= share * both && both >= share * double(A.size())) r.dominated_by.push_back(o.type);
    }
    if (r.dominated_by.empty()) t.pareto.push_back(r.type);
  }
  return t;
}

json TypeTable::to_json() const {
  json j = json_header("gamma.type_table", 1);
  j["model"] = model;
  j["n_modules"] = n_modules;
  j["share"] = share;
  j["types"] = json::array();
  for (const auto& r : rows)
    j["types"].push_back({{"type", r.type}, {"modules", r.modules}, {"bpw", r.bpw}, {"rel_err_mean", r.rel_err_mean},
                          {"rel_err_median", r.rel_err_median}, {"exact_copies", r.exact_copies},
                          {"pool_seconds", r.pool_seconds ? json(*r.pool_seconds) : json(nullptr)},
                          {"dominated_by", r.dominated_by}});
  j["pareto"] = pareto;
  return j;
}

std::string TypeTable::markdown() const {
  std::string s = fmt::format(
      "Per-type pool figures, {} ({} linear modules; error: imatrix-weighted relative error of the weights vs the "
      "teacher; dominated: another type has no more bytes and no more error on >= {:.0f}% of the modules)\n\n"
      "| type | modules | bpw | mean rel. err | median rel. err | exact copies | pool s | dominated by |\n"
      "|---|---|---|---|---|---|---|---|\n",
      model, n_modules, 100 * share);
  for (const auto& r : rows) {
    std::string dom;
    for (const auto& d : r.dominated_by) dom += (dom.empty() ? "" : ", ") + d;
    s += fmt::format("| {} | {} | {:.3f} | {:.5f} | {:.5f} | {} | {} | {} |\n", r.type, r.modules, r.bpw, r.rel_err_mean,
                     r.rel_err_median, r.exact_copies, r.pool_seconds ? fmt::format("{:.0f}", *r.pool_seconds) : "–",
                     dom.empty() ? "**Pareto**" : dom);
  }
  std::string p;
  for (const auto& x : pareto) p += (p.empty() ? "" : ",") + x;
  return s + "\nPareto set: " + p + "\n";
}

}  // namespace gm
