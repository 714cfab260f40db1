#include "solve/scores.h"

#include <cmath>

#include "util/json.h"

namespace gm::solve {

Result<Scores> Scores::load(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, kSchema, kVersion));
  Scores s;
  s.source = path;
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  s.method = str("method");
  s.model_fingerprint = str("model_fingerprint");
  s.pool_manifest_sha256 = str("pool_manifest_sha256");
  if (!j.contains("modules") || !j["modules"].is_object())
    return Status::errorf("{}: no \"modules\" object", path);
  for (const auto& [name, entry] : j["modules"].items()) {
    if (!entry.is_object() || !entry.contains("score") || !entry["score"].is_object())
      return Status::errorf("{}: module {} has no \"score\" object", path, name);
    auto& row = s.score[name];
    for (const auto& [cand, v] : entry["score"].items()) {
      if (!v.is_number())
        return Status::errorf("{}: score of {} for module {} is {}, not a number", path, cand, name, v.dump());
      double x = v.get<double>();
      if (!std::isfinite(x))
        return Status::errorf("{}: score of {} for module {} is not finite", path, cand, name);
      row[cand] = x;
    }
    if (row.empty()) return Status::errorf("{}: module {} scores no candidate", path, name);
  }
  if (s.score.empty()) return Status::errorf("{}: scores no module", path);
  return s;
}

Result<Scores> Scores::from_manifest(const Manifest& m) {
  Scores s;
  s.source = "pool manifest (-rel_err)";
  s.method = "neg_rel_err";
  s.model_fingerprint = m.model_fingerprint;
  for (const auto& e : m.modules) {
    for (const auto& c : e.candidates) {
      if (!std::isfinite(c.rel_err))
        return Status::errorf("pool manifest: rel_err of {} for module {} is not finite", c.id, e.name);
      s.score[e.name][c.id] = -c.rel_err;
    }
  }
  return s;
}

Status Scores::transform(const std::string& how, const Manifest& m) {
  if (how == "score") return Status::ok();
  if (how != "log" && how != "size-log") return Status::errorf("--transform must be score, log or size-log (got {})", how);
  double mean_n = 0;
  for (const auto& e : m.modules) mean_n += double(e.n_params) / double(m.modules.size());
  for (auto& [name, row] : score) {
    const ModuleEntry* e = m.find(name);
    const double w = how == "log" || !e ? 1.0 : double(e->n_params) / mean_n;
    for (auto& [cand, v] : row) {
      if (!(v > 0))
        return Status::errorf("--transform {} needs probabilities > 0; {} scores {} of module {} as {}", how, source, cand,
                              name, v);
      v = w * std::log(v);
    }
  }
  method += "/" + how;
  return Status::ok();
}

Status Scores::check(const Manifest& m, size_t* unscored) const {
  if (!model_fingerprint.empty() && model_fingerprint != m.model_fingerprint)
    return Status::errorf("{} scores another model (fingerprint {}…, pool has {}…)", source,
                          model_fingerprint.substr(0, 12), m.model_fingerprint.substr(0, 12));
  for (const auto& [name, row] : score) {
    const ModuleEntry* e = m.find(name);
    if (!e) return Status::errorf("{} scores module {}, which the pool does not have", source, name);
    for (const auto& [cand, v] : row)
      if (!e->find(cand))
        return Status::errorf("{} scores candidate {} of module {}, which the pool does not have", source, cand, name);
  }
  *unscored = 0;
  for (const auto& e : m.modules) {
    auto it = score.find(e.name);
    if (it == score.end()) return Status::errorf("{} gives no score for module {}", source, e.name);
    for (const auto& c : e.candidates) *unscored += it->second.count(c.id) ? 0 : 1;
  }
  return Status::ok();
}

}  // namespace gm::solve
