#include "scores/scores.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/json.h"

namespace gm::scores {

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

}  // namespace gm::scores
