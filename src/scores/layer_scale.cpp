#include "scores/layer_scale.h"

#include <algorithm>
#include <cmath>

namespace gm::scores {

Result<LayerSensitivity> LayerSensitivity::load(const std::string& path) {
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, kSchema, kVersion));
  return from_json(j, path);
}

Result<LayerSensitivity> LayerSensitivity::from_json(const json& j, const std::string& source) {
  LayerSensitivity ls;
  ls.source = source;
  auto corrupt = [&](const std::string& what) {
    return Status::errorf(Status::Code::kCorrupt, "{}: {}", source, what);
  };
  auto finite = [](const json& v) { return v.is_number() && std::isfinite(v.get<double>()); };
  if (!j.contains("model_fingerprint") || !j["model_fingerprint"].is_string()) return corrupt("no \"model_fingerprint\"");
  ls.model_fingerprint = j["model_fingerprint"].get<std::string>();
  if (!j.contains("base_kld") || !finite(j["base_kld"])) return corrupt("\"base_kld\" is not a finite number");
  ls.base_kld = j["base_kld"].get<double>();
  if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty()) return corrupt("no \"layers\" array");
  for (const auto& l : j["layers"]) {
    if (!l.is_object() || !l.contains("layer") || !l["layer"].is_number_integer() || !l.contains("kld") || !finite(l["kld"]))
      return corrupt("each of \"layers\" needs an integer \"layer\" and a finite \"kld\"");
    const int k = l["layer"].get<int>();
    if (ls.kld.count(k)) return corrupt(fmt::format("layer {} is measured twice", k));
    ls.kld[k] = l["kld"].get<double>();
  }
  if (!j.contains("modules") || !j["modules"].is_object() || j["modules"].empty()) return corrupt("no \"modules\" object");
  for (const auto& [name, e] : j["modules"].items()) {
    if (!e.is_object() || !e.contains("ref") || !e["ref"].is_string() || !e.contains("low") || !e["low"].is_string())
      return corrupt(fmt::format("module {} needs \"ref\" and \"low\" candidate ids", name));
    ls.ref[name] = e["ref"].get<std::string>();
    ls.low[name] = e["low"].get<std::string>();
  }
  if (j.contains("heads")) {
    if (!j["heads"].is_object()) return corrupt("\"heads\" is not an object");
    for (const auto& [tensor, h] : j["heads"].items()) {
      if (!h.is_object() || !h.contains("ref") || !h["ref"].is_string() || !h.contains("kld") || !h["kld"].is_object())
        return corrupt(fmt::format("heads[{}] needs a \"ref\" type and a \"kld\" object", tensor));
      ls.head_ref[tensor] = h["ref"].get<std::string>();
      for (const auto& [type, v] : h["kld"].items()) {
        if (!finite(v)) return corrupt(fmt::format("heads[{}].kld[{}] is not a finite number", tensor, type));
        ls.head_kld[tensor][type] = v.get<double>();
      }
    }
  }
  if (j.contains("info")) ls.info = j["info"];
  return ls;
}

json LayerSensitivity::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["model_fingerprint"] = model_fingerprint;
  j["base_kld"] = base_kld;
  json layers = json::array();
  for (const auto& [l, k] : kld) layers.push_back({{"layer", l}, {"kld", k}, {"delta", k - base_kld}});
  j["layers"] = layers;
  json mods = json::object();
  for (const auto& [name, r] : ref) mods[name] = {{"ref", r}, {"low", low.at(name)}};
  j["modules"] = mods;
  if (!head_ref.empty()) {
    json heads = json::object();
    for (const auto& [tensor, r] : head_ref) {
      json k = json::object();
      if (auto it = head_kld.find(tensor); it != head_kld.end())
        for (const auto& [type, v] : it->second) k[type] = v;
      heads[tensor] = {{"ref", r}, {"kld", k}};
    }
    j["heads"] = heads;
  }
  j["info"] = info;
  return j;
}

Status scale_by_layer(Scores& s, const LayerSensitivity& ls, const Manifest& m, std::vector<int>* split_by_rel_err) {
  if (ls.model_fingerprint != m.model_fingerprint)
    return Status::errorf("{} measured another model (fingerprint {}…, pool has {}…)", ls.source,
                          ls.model_fingerprint.substr(0, 12), m.model_fingerprint.substr(0, 12));
  std::map<int, std::vector<std::string>> by_layer;
  for (const auto& [name, row] : s.score) {
    const ModuleEntry* e = m.find(name);
    if (!e) return Status::errorf("{} scores module {}, which the pool does not have", s.source, name);
    by_layer[e->layer].push_back(name);
  }
  split_by_rel_err->clear();
  for (const auto& [layer, names] : by_layer) {
    auto it = ls.kld.find(layer);
    if (it == ls.kld.end()) return Status::errorf("{} has no measurement for layer {}", ls.source, layer);
    const double measured = std::max(0.0, it->second - ls.base_kld);
    // The scores' own loss change from each module's reference to its low candidate.
    double total = 0;
    for (const auto& name : names) {
      auto r = ls.ref.find(name), lo = ls.low.find(name);
      if (r == ls.ref.end() || lo == ls.low.end()) return Status::errorf("{} did not measure module {}", ls.source, name);
      const auto& row = s.score.at(name);
      for (const auto* id : {&r->second, &lo->second})
        if (!row.count(*id))
          return Status::errorf("{} gives module {} no score for {}, the candidate {} measured layer {} with", s.source, name,
                                *id, ls.source, layer);
      total += row.at(r->second) - row.at(lo->second);
    }
    if (!(total > 0)) {
      // No loss seen by the scorer: the pool's weight error x size splits the measured change.
      split_by_rel_err->push_back(layer);
      total = 0;
      for (const auto& name : names) {
        const ModuleEntry* e = m.find(name);
        for (auto& [cand, v] : s.score.at(name)) {
          const Candidate* c = e->find(cand);
          if (!c) return Status::errorf("{} scores candidate {} of module {}, which the pool does not have", s.source, cand, name);
          v = -c->rel_err * double(e->n_params);
        }
        const auto& row = s.score.at(name);
        total += row.at(ls.ref.at(name)) - row.at(ls.low.at(name));
      }
      if (!(total > 0))
        return Status::errorf("layer {}: the low candidates of {} are not worse than the reference ones in the pool's rel_err",
                              layer, ls.source);
    }
    const double c = measured / total;
    for (const auto& name : names)
      for (auto& [cand, v] : s.score.at(name)) v *= c;
  }
  s.method += "/layer-scale";
  return Status::ok();
}

}  // namespace gm::scores
