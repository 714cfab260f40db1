#include "pool/manifest.h"

#include <algorithm>

namespace gm {

const Candidate* ModuleEntry::find(const std::string& id) const {
  for (const auto& c : candidates)
    if (c.id == id) return &c;
  return nullptr;
}

int64_t Manifest::total_params() const {
  int64_t n = 0;
  for (const auto& m : modules) n += m.n_params;
  return n;
}

const ModuleEntry* Manifest::find(const std::string& name) const {
  for (const auto& m : modules)
    if (m.name == name) return &m;
  return nullptr;
}

Status Manifest::needs_candidates() const {
  if (estimate_rows <= 0 || streamed) return Status::ok();
  return Status::errorf("{} holds estimates from {} rows per module, not candidates (gamma pool without --estimate-rows "
                        "builds them)", dir, estimate_rows);
}

Status Manifest::check_source(const std::string& fingerprint, const std::string& imatrix_sha) const {
  const char* what = streamed ? "streamed pool" : "pool";
  if (fingerprint != model_fingerprint)
    return Status::errorf("{} changed since the {} {} was made (fingerprint differs); make it again", model_path, what, dir);
  if (streamed && !imatrix_path.empty() && imatrix_sha != imatrix_sha256)
    return Status::errorf("{} changed since the {} {} was made; make it again", imatrix_path, what, dir);
  return Status::ok();
}

json Manifest::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["model"] = {{"path", model_path}, {"fingerprint", model_fingerprint}, {"arch", arch}, {"n_layer", n_layer}};
  j["imatrix"] = imatrix_path.empty() ? json(nullptr) : json{{"path", imatrix_path}, {"sha256", imatrix_sha256}};
  j["types"] = types;
  j["alignment"] = alignment;
  j["header_bytes"] = header_bytes;
  if (estimate_rows > 0) j["estimate_rows"] = estimate_rows;
  if (streamed) j["streamed"] = true;
  json mods = json::array();
  for (const auto& m : modules) {
    json cands = json::array();
    for (const auto& c : m.candidates) {
      cands.push_back({{"id", c.id}, {"type", c.type}, {"bytes", c.bytes}, {"file_bytes", c.file_bytes},
                       {"bpw", c.bpw}, {"rel_err", c.rel_err}, {"file", c.file}});
      if (c.sq_err >= 0) cands.back()["sq_err"] = c.sq_err;
    }
    mods.push_back({{"name", m.name}, {"layer", m.layer}, {"kind", m.kind}, {"shape", m.shape},
                    {"n_params", m.n_params}, {"source_type", m.source_type}, {"candidates", cands}});
  }
  j["modules"] = mods;
  json fx = json::array();
  for (const auto& f : fixed)
    fx.push_back({{"name", f.name}, {"shape", f.shape}, {"source_type", f.source_type}, {"quantize", f.quantize}});
  j["fixed"] = fx;
  return j;
}

Result<Manifest> Manifest::from_json(const json& j, const std::string& dir) {
  Manifest m;
  m.dir = dir;
  try {
    m.model_path = j.at("model").at("path").get<std::string>();
    m.model_fingerprint = j.at("model").at("fingerprint").get<std::string>();
    m.arch = j.at("model").at("arch").get<std::string>();
    m.n_layer = int_at<int>(j.at("model"), "n_layer");
    if (!j.at("imatrix").is_null()) {
      m.imatrix_path = j["imatrix"].at("path").get<std::string>();
      m.imatrix_sha256 = j["imatrix"].at("sha256").get<std::string>();
    }
    m.types = j.at("types").get<std::vector<std::string>>();
    m.alignment = int_at<uint64_t>(j, "alignment");
    m.header_bytes = int_at<uint64_t>(j, "header_bytes");
    if (j.contains("estimate_rows")) m.estimate_rows = int_at<int64_t>(j, "estimate_rows");
    m.streamed = j.value("streamed", false);
    for (const auto& jm : j.at("modules")) {
      ModuleEntry e;
      e.name = jm.at("name").get<std::string>();
      e.layer = int_at<int>(jm, "layer");
      e.kind = jm.at("kind").get<std::string>();
      e.shape = ints_at<int64_t>(jm, "shape");
      e.n_params = int_at<int64_t>(jm, "n_params");
      e.source_type = jm.at("source_type").get<std::string>();
      for (const auto& jc : jm.at("candidates")) {
        Candidate c;
        c.id = jc.at("id").get<std::string>();
        c.type = jc.at("type").get<std::string>();
        c.bytes = int_at<uint64_t>(jc, "bytes");
        c.file_bytes = int_at<uint64_t>(jc, "file_bytes");
        c.bpw = jc.at("bpw").get<double>();
        c.rel_err = jc.at("rel_err").get<double>();
        c.file = jc.at("file").get<std::string>();
        if (jc.contains("sq_err")) c.sq_err = jc.at("sq_err").get<double>();
        e.candidates.push_back(std::move(c));
      }
      if (e.candidates.empty()) return Status::errorf("module {} has no candidates", e.name);
      m.modules.push_back(std::move(e));
    }
    for (const auto& jf : j.at("fixed")) {
      FixedTensor f;
      f.name = jf.at("name").get<std::string>();
      f.shape = ints_at<int64_t>(jf, "shape");
      f.source_type = jf.at("source_type").get<std::string>();
      if (jf.contains("quantize")) f.quantize = jf.at("quantize").get<bool>();
      m.fixed.push_back(std::move(f));
    }
  } catch (const std::exception& e) {  // json::exception, or int_at's std::invalid_argument
    return Status::errorf("malformed pool manifest: {}", e.what());
  }
  if (m.modules.empty()) return Status::error("pool manifest lists no modules");
  return m;
}

Result<Manifest> Manifest::load(const std::string& pool_dir) {
  const std::string path = pool_dir + "/manifest.json";
  GAMMA_ASSIGN_OR_RETURN(json j, read_json(path, kSchema, kVersion));
  auto r = from_json(j, pool_dir);
  if (!r.is_ok()) return r.status().with_context(path);
  return r;
}

Status Manifest::save() const { return write_json(dir + "/manifest.json", to_json()); }

}  // namespace gm
