#include "solve/scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/json.h"

namespace gm::solve {

Result<Scores> Scores::load(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, kSchema, kVersion));
  return from_json(j, path);
}

Result<Scores> Scores::from_json(const json& j, const std::string& source) {
  Scores s;
  s.source = source;
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  s.method = str("method");
  s.model_fingerprint = str("model_fingerprint");
  s.pool_manifest_sha256 = str("pool_manifest_sha256");
  if (j.contains("target_bpw")) {
    if (!j["target_bpw"].is_number() || !std::isfinite(j["target_bpw"].get<double>()))
      return Status::errorf(Status::Code::kCorrupt, "{}: field 'target_bpw' is not a finite number", source);
    s.target_bpw = j["target_bpw"].get<double>();
  }
  if (!j.contains("modules") || !j["modules"].is_object())
    return Status::errorf(Status::Code::kCorrupt, "{}: no \"modules\" object", source);
  // A finite number for every entry of an object field ("score", "p") of a module.
  auto numbers = [&](const std::string& name, const json& obj, const char* field,
                     std::map<std::string, double>& row) -> Status {
    if (!obj.is_object()) return Status::errorf(Status::Code::kCorrupt, "{}: module {}: \"{}\" is not an object", source, name, field);
    for (const auto& [cand, v] : obj.items()) {
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return Status::errorf(Status::Code::kCorrupt, "{}: module {}: {}[{}] is not a finite number ({}{})", source, name,
                              field, cand, v.dump(), v.is_number() ? "" : " is not a number");
      row[cand] = v.get<double>();
    }
    return Status::ok();
  };
  for (const auto& [name, entry] : j["modules"].items()) {
    if (!entry.is_object() || !entry.contains("score") || !entry["score"].is_object())
      return Status::errorf(Status::Code::kCorrupt, "{}: module {} has no \"score\" object", source, name);
    GAMMA_RETURN_IF_ERROR(numbers(name, entry["score"], "score", s.score[name]));
    if (s.score[name].empty()) return Status::errorf(Status::Code::kCorrupt, "{}: module {} scores no candidate", source, name);
    if (entry.contains("p")) GAMMA_RETURN_IF_ERROR(numbers(name, entry["p"], "p", s.p[name]));
    if (entry.contains("delta")) GAMMA_RETURN_IF_ERROR(numbers(name, entry["delta"], "delta", s.delta[name]));
  }
  if (s.score.empty()) return Status::errorf(Status::Code::kCorrupt, "{}: scores no module", source);
  return s;
}

json Scores::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["method"] = method;
  if (!model_fingerprint.empty()) j["model_fingerprint"] = model_fingerprint;
  if (!pool_manifest_sha256.empty()) j["pool_manifest_sha256"] = pool_manifest_sha256;
  if (target_bpw) j["target_bpw"] = *target_bpw;
  json mods = json::object();
  for (const auto& [name, row] : score) {
    mods[name]["score"] = row;
    if (auto it = p.find(name); it != p.end()) mods[name]["p"] = it->second;
    if (auto it = delta.find(name); it != delta.end()) mods[name]["delta"] = it->second;
  }
  j["modules"] = mods;
  return j;
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
  if (how == "delta" || how == "delta-fit") {
    // delta: -delta, the measured loss change. delta-fit: the measured loss change of a
    // module's candidates is, to a median R^2 of 0.995 on Qwen (results/iq_qwen/delta_fit.json),
    // a straight line in the pool's imatrix-weighted relative error, delta_b = a + c * rel_err_b;
    // the fitted slope c is the module's measured sensitivity, and -c * rel_err_b keeps it
    // while dropping the measurement noise (the intercept, the same for every candidate of a
    // module, cannot change a plan). A module whose slope is not positive keeps -delta.
    const bool fit = how == "delta-fit";
    fit_fallbacks = 0;
    for (auto& [name, row] : score) {
      auto it = delta.find(name);
      const ModuleEntry* e = m.find(name);
      double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (auto& [cand, v] : row) {
        if (it == delta.end() || !it->second.count(cand))
          return Status::errorf("--transform {} needs measured loss changes (gamma learn --measure-every); {} has none for {} of module {}",
                                how, source, cand, name);
        v = -it->second.at(cand);
        if (!fit) continue;
        const Candidate* c = e ? e->find(cand) : nullptr;
        if (!c) return Status::errorf("{} scores candidate {} of module {}, which the pool does not have", source, cand, name);
        const double x = c->rel_err, y = -v;
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
      }
      if (!fit) continue;
      const double var = sxx - sx * sx / n, slope = var > 0 ? (sxy - sx * sy / n) / var : 0;
      if (slope > 0)
        for (auto& [cand, v] : row) v = -slope * e->find(cand)->rel_err;
      else
        ++fit_fallbacks;
    }
    method += "/" + how;
    return Status::ok();
  }
  if (how != "log" && how != "size-log")
    return Status::errorf("--transform must be score, log, size-log, delta or delta-fit (got {})", how);
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

Status Scores::blend(const Scores& other) {
  if (!model_fingerprint.empty() && !other.model_fingerprint.empty() && model_fingerprint != other.model_fingerprint)
    return Status::errorf("--blend: {} and {} score different models", source, other.source);
  auto costs = [](const std::map<std::string, double>& row) {
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& [cand, v] : row) best = std::max(best, v);
    std::map<std::string, double> c;
    for (const auto& [cand, v] : row) c[cand] = best - v;
    return c;
  };
  for (auto& [name, row] : score) {
    auto it = other.score.find(name);
    if (it == other.score.end()) return Status::errorf("--blend: {} gives no score for module {}", other.source, name);
    std::map<std::string, double> mine, theirs;  // the candidates both score
    for (const auto& [cand, v] : row)
      if (auto t = it->second.find(cand); t != it->second.end()) mine[cand] = v, theirs[cand] = t->second;
    if (mine.empty())
      return Status::errorf("--blend: {} and {} share no candidate of module {}", source, other.source, name);
    const auto ca = costs(mine), cb = costs(theirs);
    row.clear();
    for (const auto& [cand, a] : ca) row[cand] = -std::sqrt(a * cb.at(cand));
    p.erase(name);
  }
  method += "+blend(" + other.method + ")";
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
