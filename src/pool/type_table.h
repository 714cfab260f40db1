// A pool's per-type table (`gamma inspect POOL_DIR`): for each candidate type, the modules it
// fits, its real bits per weight (block scales included), the imatrix-weighted relative error
// of the weights (parameter-weighted mean and median over modules), how many candidates are
// exact copies of the source, the pool's wall time for it, and which types dominate it: no
// more bytes and no more error on at least `share` of the modules both fit. The types no other
// dominates are the Pareto set (how gamma pool's auto set was chosen, results/iq_*/types.md).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "util/json.h"

namespace gm {

struct TypeRow {
  std::string type;
  int modules = 0;
  double bpw = 0, rel_err_mean = 0, rel_err_median = 0;
  int exact_copies = 0;
  std::optional<double> pool_seconds;  // from the part's sidecar, when there
  std::vector<std::string> dominated_by;
};

struct TypeTable {
  std::string model;  // the pool's source model file name
  int n_modules = 0;
  double share = 0.9;
  std::vector<TypeRow> rows;  // by bpw
  std::vector<std::string> pareto;

  json to_json() const;        // schema gamma.type_table v1
  std::string markdown() const;
};

// Imported candidates ("TYPE@LABEL") and the F16 fallback are left out.
TypeTable type_table(const Manifest& m, double share = 0.9);

}  // namespace gm
