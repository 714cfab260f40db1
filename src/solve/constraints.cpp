#include "solve/constraints.h"

namespace gm::solve {

Result<Constraint> parse_constraint(Constraint::Kind kind, const std::string& spec) {
  const char* flag = kind == Constraint::Kind::kPin ? "--pin" : "--allow";
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return Status::errorf("{} '{}': expected PATTERN=ID{}", flag, spec, kind == Constraint::Kind::kPin ? "" : "[,ID...]");
  Constraint c{kind, spec, {}, {}};
  try {
    c.pattern = std::regex(spec.substr(0, eq), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return Status::errorf("{} '{}': bad pattern: {}", flag, spec, e.what());
  }
  std::string rest = spec.substr(eq + 1);
  for (size_t start = 0;;) {
    size_t comma = rest.find(',', start);
    std::string id = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (id.empty()) return Status::errorf("{} '{}': empty candidate id", flag, spec);
    c.ids.push_back(id);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (kind == Constraint::Kind::kPin && c.ids.size() != 1)
    return Status::errorf("--pin '{}': pins exactly one candidate", spec);
  return c;
}

Result<std::vector<std::vector<int>>> allowed_candidates(const Manifest& m, const std::vector<Constraint>& cs) {
  std::vector<std::vector<bool>> ok(m.modules.size());
  for (size_t i = 0; i < m.modules.size(); ++i) ok[i].assign(m.modules[i].candidates.size(), true);
  for (const auto& c : cs) {
    const char* flag = c.kind == Constraint::Kind::kPin ? "--pin" : "--allow";
    bool matched = false;
    for (size_t i = 0; i < m.modules.size(); ++i) {
      const ModuleEntry& e = m.modules[i];
      if (!std::regex_search(e.name, c.pattern)) continue;
      matched = true;
      std::vector<bool> permit(e.candidates.size(), false);
      for (const auto& id : c.ids) {
        // An exact id wins; otherwise every candidate of that ggml type.
        int exact = -1, by_type = 0;
        for (size_t j = 0; j < e.candidates.size(); ++j) {
          if (e.candidates[j].id == id) exact = int(j);
          by_type += e.candidates[j].type == id;
        }
        if (exact < 0 && by_type == 0)
          return Status::errorf("{} '{}': module {} has no candidate {}", flag, c.spec, e.name, id);
        if (exact < 0 && by_type > 1 && c.kind == Constraint::Kind::kPin)
          return Status::errorf("--pin '{}': module {} has {} candidates of type {}; pin one by id", c.spec, e.name,
                                by_type, id);
        for (size_t j = 0; j < e.candidates.size(); ++j)
          if (int(j) == exact || (exact < 0 && e.candidates[j].type == id)) permit[j] = true;
      }
      bool any = false;
      for (size_t j = 0; j < permit.size(); ++j) any |= (ok[i][j] = ok[i][j] && permit[j]);
      if (!any) return Status::errorf("{} '{}' leaves module {} no allowed candidate (constraints conflict)", flag, c.spec, e.name);
    }
    if (!matched) return Status::errorf("{} '{}': the pattern matches no module", flag, c.spec);
  }
  std::vector<std::vector<int>> out(m.modules.size());
  for (size_t i = 0; i < ok.size(); ++i)
    for (size_t j = 0; j < ok[i].size(); ++j)
      if (ok[i][j]) out[i].push_back(int(j));
  return out;
}

}  // namespace gm::solve
