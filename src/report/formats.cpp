#include "report/formats.h"

#include <cmath>

namespace gm::report {

json RunList::to_json() const {
  json j = json_header(kSchema, kVersion);
  if (!pool.empty()) j["pool"] = pool;
  j["runs"] = json::array();
  for (const auto& r : runs) {
    json e = {{"method", r.method}};
    if (!r.label.empty()) e["label"] = r.label;
    if (r.budget_bpw) e["budget_bpw"] = *r.budget_bpw;
    if (!r.plan.empty()) e["plan"] = r.plan;
    if (!r.eval.empty()) e["eval"] = r.eval;
    if (!r.scores.empty()) e["scores"] = r.scores;
    j["runs"].push_back(e);
  }
  return j;
}

Result<RunList> RunList::from_json(const json& j) {
  RunList l;
  Status st;
  const FieldReader r(j, &st);
  r.only({"schema", "version", "pool", "runs"});
  l.pool = r.opt<std::string>("pool").value_or("");
  const auto runs = r.elements("runs");
  if (!r.has("runs")) r.fail("no \"runs\" array");
  else if (runs.empty()) r.fail("\"runs\" is empty");
  for (const FieldReader& e : runs) {
    e.only({"method", "label", "budget_bpw", "plan", "eval", "scores"});
    RunEntry& x = l.runs.emplace_back();
    x.method = e.opt<std::string>("method").value_or("");
    if (x.method.empty()) e.fail("no \"method\"");
    x.label = e.opt<std::string>("label").value_or("");
    e.get("budget_bpw", &x.budget_bpw);
    if (x.budget_bpw && *x.budget_bpw <= 0) e.fail("budget_bpw must be positive");
    x.plan = e.opt<std::string>("plan").value_or("");
    x.eval = e.opt<std::string>("eval").value_or("");
    x.scores = e.opt<std::string>("scores").value_or("");
    if (x.plan.empty() && x.eval.empty()) e.fail("needs a \"plan\" or an \"eval\"");
  }
  if (!st.is_ok()) return st;
  return l;
}

Result<RunList> RunList::load(const std::string& path) { return load_typed<RunList>(path); }

json Summary::to_json() const {
  json j = json_header(kSchema, kVersion);
  j["pool"] = or_null(pool);
  j["runs"] = json::array();
  for (const auto& r : runs) {
    json jr;
    jr["method"] = r.method;
    jr["label"] = r.label;
    jr["budget_bpw"] = or_null(r.budget_bpw);
    jr["plan"] = or_null(r.plan), jr["eval"] = or_null(r.eval), jr["scores"] = or_null(r.scores);
    jr["file_bytes"] = or_null(r.file_bytes);
    jr["file_bytes_predicted"] = r.file_bytes_predicted;
    jr["linear_bpw"] = or_null(r.linear_bpw);
    jr["kld"] = or_null(r.kld), jr["kld_stderr"] = or_null(r.kld_stderr);
    jr["ppl"] = or_null(r.ppl), jr["ppl_stderr"] = or_null(r.ppl_stderr);
    jr["top1"] = or_null(r.top1), jr["top1_stderr"] = or_null(r.top1_stderr);
    json& jt = jr["tasks"] = json::object();
    for (const auto& t : r.tasks) jt[t.name] = {{"acc", or_null(t.acc)}, {"acc_norm", or_null(t.acc_norm)}, {"n", or_null(t.n)}};
    if (r.types) {
      jr["types"] = *r.types;
      jr["pearson_p_choice"] = or_null(r.pearson_p_choice);
    }
    j["runs"].push_back(jr);
  }
  j["cosine"] = nullptr;
  if (cosine) {
    json mat = json::array();
    for (const auto& row : cosine->matrix) {
      json jr = json::array();
      for (double c : row) jr.push_back(std::isfinite(c) ? json(c) : json(nullptr));
      mat.push_back(jr);
    }
    j["cosine"] = {{"labels", cosine->labels}, {"matrix", mat}, {"vector", cosine->vector}};
  }
  return j;
}

Result<Summary> Summary::from_json(const json& j) {
  Summary s;
  Status st;
  const FieldReader r(j, &st);
  r.get("pool", &s.pool);
  for (const FieldReader& e : r.elements("runs")) {
    RunRow& x = s.runs.emplace_back();
    x.method = e.opt<std::string>("method").value_or("");
    x.label = e.opt<std::string>("label").value_or("");
    e.get("budget_bpw", &x.budget_bpw);
    e.get("plan", &x.plan), e.get("eval", &x.eval), e.get("scores", &x.scores);
    e.get("file_bytes", &x.file_bytes);
    x.file_bytes_predicted = e.opt<bool>("file_bytes_predicted").value_or(false);
    e.get("linear_bpw", &x.linear_bpw), e.get("kld", &x.kld), e.get("kld_stderr", &x.kld_stderr);
    e.get("ppl", &x.ppl), e.get("ppl_stderr", &x.ppl_stderr), e.get("top1", &x.top1);
    e.get("top1_stderr", &x.top1_stderr);
    for (const auto& [name, t] : e.object("tasks").members())
      x.tasks.push_back({name, t.opt<double>("acc"), t.opt<double>("acc_norm"), t.opt<double>("n")});
    if (const FieldReader types = e.object("types"); types.present()) {
      x.types.emplace();
      for (const auto& [id, unused] : types.members()) (*x.types)[id] = types.opt<uint64_t>(id.c_str()).value_or(0);
      e.get("pearson_p_choice", &x.pearson_p_choice);
    }
  }
  // The cosine block: plain arrays (labels, and rows with null where undefined).
  const FieldReader c = r.object("cosine");
  if (c.present()) {
    Cosine& cos = s.cosine.emplace();
    cos.vector = c.opt<std::string>("vector").value_or("");
    const json& jc = j["cosine"];
    const bool labels_ok = jc.contains("labels") && jc["labels"].is_array();
    bool rows_ok = jc.contains("matrix") && jc["matrix"].is_array();
    for (size_t i = 0; labels_ok && i < jc["labels"].size(); ++i) {
      if (!jc["labels"][i].is_string()) { c.fail("labels hold a non-string"); break; }
      cos.labels.push_back(jc["labels"][i].get<std::string>());
    }
    for (size_t i = 0; rows_ok && i < jc["matrix"].size(); ++i) {
      const json& row = jc["matrix"][i];
      rows_ok = row.is_array() && row.size() == cos.labels.size();
      auto& out = cos.matrix.emplace_back();
      for (size_t k = 0; rows_ok && k < row.size(); ++k) {
        rows_ok = row[k].is_null() || row[k].is_number();
        out.push_back(row[k].is_number() ? row[k].get<double>() : NAN);
      }
    }
    if (!labels_ok || !rows_ok || cos.matrix.size() != cos.labels.size())
      c.fail("labels and matrix are not a square table of numbers (or null)");
  }
  if (!st.is_ok()) return st;
  return s;
}

Result<Summary> Summary::load(const std::string& path) { return load_typed<Summary>(path); }

}  // namespace gm::report
