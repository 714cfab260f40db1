#include "learn/checkpoint.h"

#include <cmath>

#include "util/files.h"

namespace gm {
namespace {

Status bad(const std::string& source, const std::string& what) {
  return Status::errorf(Status::Code::kCorrupt, "{}: {}", source, what);
}

Result<double> finite_at(const json& j, const char* key, const std::string& source) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
    return bad(source, fmt::format("field '{}' is not a finite number", key));
  return j[key].get<double>();
}

Result<std::vector<double>> finite_array(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_array()) return bad(source, fmt::format("field '{}' is not an array", key));
  std::vector<double> v;
  for (const auto& x : j[key]) {
    if (!x.is_number() || !std::isfinite(x.get<double>()))
      return bad(source, fmt::format("field '{}' holds {}, not a finite number", key, x.dump()));
    v.push_back(x.get<double>());
  }
  return v;
}

}  // namespace

Result<Checkpoint> Checkpoint::from_json(const json& j, const std::string& source) {
  Checkpoint c;
  if (!j.is_object() || !j.contains("config")) return bad(source, "no 'config'");
  c.config = j["config"];
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0 ||
      j["step"].get<int64_t>() > (int64_t(1) << 30))
    return bad(source, "field 'step' is not a step count");
  c.step = int(j["step"].get<int64_t>());
  GAMMA_ASSIGN_OR_RETURN(c.lambda1, finite_at(j, "lambda1", source));
  GAMMA_ASSIGN_OR_RETURN(c.lambda2, finite_at(j, "lambda2", source));
  GAMMA_ASSIGN_OR_RETURN(c.mse_ref, finite_at(j, "mse_ref", source));
  GAMMA_ASSIGN_OR_RETURN(c.mse_eval_init, finite_at(j, "mse_eval_init", source));
  GAMMA_ASSIGN_OR_RETURN(c.seconds, finite_at(j, "seconds", source));
  if (!j.contains("curve") || !j["curve"].is_array()) return bad(source, "field 'curve' is not an array");
  c.curve = j["curve"];
  if (j.contains("convergence") && j["convergence"].is_array()) c.convergence = j["convergence"];
  if (!j.contains("modules") || !j["modules"].is_array()) return bad(source, "field 'modules' is not an array");
  for (const auto& m : j["modules"]) {
    if (!m.is_object() || !m.contains("name") || !m["name"].is_string()) return bad(source, "a module without a name");
    Module mod;
    mod.name = m["name"].get<std::string>();
    GAMMA_ASSIGN_OR_RETURN(mod.pi, finite_array(m, "pi", source));
    GAMMA_ASSIGN_OR_RETURN(mod.m, finite_array(m, "m", source));
    GAMMA_ASSIGN_OR_RETURN(mod.v, finite_array(m, "v", source));
    if (mod.m.size() != mod.pi.size() || mod.v.size() != mod.pi.size())
      return bad(source, fmt::format("module {}: pi, m and v differ in length", mod.name));
    if (m.contains("dsum")) {
      GAMMA_ASSIGN_OR_RETURN(mod.dsum, finite_array(m, "dsum", source));
      if (mod.dsum.size() != mod.pi.size()) return bad(source, fmt::format("module {}: dsum and pi differ in length", mod.name));
      if (!m.contains("dn") || !m["dn"].is_number_integer() || m["dn"].get<int64_t>() < 0)
        return bad(source, fmt::format("module {}: field 'dn' is not a count", mod.name));
      mod.dn = m["dn"].get<int64_t>();
      if (m.contains("dsum2")) {
        GAMMA_ASSIGN_OR_RETURN(mod.dsum2, finite_array(m, "dsum2", source));
        if (mod.dsum2.size() != mod.pi.size())
          return bad(source, fmt::format("module {}: dsum2 and pi differ in length", mod.name));
      }
    }
    c.modules.push_back(std::move(mod));
  }
  return c;
}

json Checkpoint::to_json() const {
  json c = json_header(kSchema, kVersion);
  c["config"] = config;
  c["step"] = step;
  c["lambda1"] = lambda1;
  c["lambda2"] = lambda2;
  c["mse_ref"] = mse_ref;
  c["mse_eval_init"] = mse_eval_init;
  c["seconds"] = seconds;
  json ms = json::array();
  for (const auto& m : modules) {
    ms.push_back({{"name", m.name}, {"pi", m.pi}, {"m", m.m}, {"v", m.v}});
    if (!m.dsum.empty()) ms.back()["dsum"] = m.dsum, ms.back()["dn"] = m.dn;
    if (!m.dsum2.empty()) ms.back()["dsum2"] = m.dsum2;
  }
  c["modules"] = ms;
  c["curve"] = curve;
  c["convergence"] = convergence;
  return c;
}

Status Checkpoint::save(const std::string& path) const {
  return write_file_atomic_nosync(path, to_json().dump() + "\n");
}

}  // namespace gm
