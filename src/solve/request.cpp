#include "solve/request.h"

#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "scores/layer_scale.h"
#include "scores/scores.h"
#include "solve/fill.h"
#include "solve/head_choice.h"

namespace gm::solve {
namespace {

// File names for sweep plans: enough decimals to tell the budgets apart.
std::string plan_name(double bpw, double step) {
  int decimals = 2;
  while (decimals < 9 && std::fabs(step * std::pow(10.0, decimals) - std::round(step * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  return fmt::format("plan-{:.{}f}bpw.json", bpw, decimals);
}

// The scores as the request re-expresses them: transformed, blended, rescaled by layer. The
// plan's info records each step.
Result<scores::Scores> request_scores(const Manifest& m, const Request& r, json* info) {
  GAMMA_ASSIGN_OR_RETURN(scores::Scores s, r.scores.empty() ? scores::Scores::from_manifest(m) : scores::Scores::load(r.scores));
  GAMMA_RETURN_IF_ERROR(s.transform(r.transform, m));
  if (r.transform != "score") (*info)["transform"] = r.transform;
  if (r.transform == "delta-fit") (*info)["delta_fit_raw_modules"] = s.fit_fallbacks;
  if (!r.blend.empty()) {
    GAMMA_ASSIGN_OR_RETURN(scores::Scores other, scores::Scores::load(r.blend));
    GAMMA_RETURN_IF_ERROR(s.blend(other));
    (*info)["blend"] = r.blend;
  }
  if (!r.layer_scale.empty()) {
    GAMMA_ASSIGN_OR_RETURN(auto ls, scores::LayerSensitivity::load(r.layer_scale));
    std::vector<int> split_layers;
    GAMMA_RETURN_IF_ERROR(scores::scale_by_layer(s, ls, m, &split_layers));
    (*info)["layer_scale"] = {{"file", r.layer_scale}, {"rel_err_split_layers", split_layers}};
  }
  return s;
}

}  // namespace

Status Request::check() const {
  if (budget.has_value() == !sweep.empty())
    return Status::error("give exactly one budget: --bpw X, --size BYTES or --sweep START:STOP:STEP");
  if (!(knapsack.max_seconds > 0)) return Status::error("--time-limit must be positive");
  if (fill != 0 && !(fill > 0 && fill <= 1)) return Status::error("--fill must be in (0, 1]");
  if (fill > 0 && !sweep.empty()) return Status::error("--fill takes one budget (--bpw or --size), not --sweep");
  if (!choose_head.empty() && (!budget || budget->kind != Budget::Kind::kFileBytes))
    return Status::error("--choose-head takes a file-size budget (--size): a --bpw budget does not pay for the head");
  if (!choose_head.empty() && fill > 0) return Status::error("--choose-head and --fill do not combine");
  if (!blend.empty() && scores.empty()) return Status::error("--blend needs --scores (it blends two scorers' files)");
  if ((!min_decode.empty() || !min_prefill.empty()) && speed.empty())
    return Status::error("--min-decode and --min-prefill need --speed SPEED.json (gamma speed --pool)");
  if (memory_bytes && (!budget || budget->kind != Budget::Kind::kFileBytes || fill > 0 || !choose_head.empty()))
    return Status::error("--memory takes a file-size budget (--size or --memory alone), not --fill or --choose-head");
  if (!speed.empty() && (!budget || budget->kind != Budget::Kind::kFileBytes))
    return Status::error("--speed takes a file-size budget (--size): the head and the rest of the file take time too");
  if (!speed.empty() && (fill > 0 || !choose_head.empty()))
    return Status::error("--speed does not combine with --fill or --choose-head");
  return Status::ok();
}

Result<Outcome> solve_request(const Manifest& m, const Request& r) {
  GAMMA_RETURN_IF_ERROR(r.check());
  json info = json::object();
  GAMMA_ASSIGN_OR_RETURN(scores::Scores s, request_scores(m, r, &info));
  // Created first in every mode: it checks the scores against the pool and the fixed types.
  GAMMA_ASSIGN_OR_RETURN(auto alloc, Allocator::create(m, s, r.constraints, r.knapsack, r.fixed));
  Outcome out;
  if (!r.sweep.empty()) {
    GAMMA_ASSIGN_OR_RETURN(out.plans, alloc.sweep(r.sweep));
    const double step = r.sweep.size() > 1 ? r.sweep[1] - r.sweep[0] : 0.01;
    for (auto& a : out.plans) {
      out.names.push_back(plan_name(a.budget.bpw, step));
      for (const auto& [k, v] : info.items()) a.plan.info[k] = v;
    }
    out.pareto = alloc.pareto(out.plans, out.names);
    return out;
  }
  Allocation a;
  if (!r.choose_head.empty()) {
    GAMMA_ASSIGN_OR_RETURN(auto heads, scores::LayerSensitivity::load(r.choose_head));
    json head_info;
    GAMMA_ASSIGN_OR_RETURN(a, solve_choosing_head(m, s, r.constraints, r.knapsack, r.fixed, *r.budget, heads, &head_info));
    a.plan.info["choose_head"] = head_info;
  } else if (r.fill > 0) {
    double kappa = 0;
    GAMMA_ASSIGN_OR_RETURN(a, solve_filled(m, s, r.constraints, r.knapsack, r.fixed, *r.budget, r.fill, &kappa));
    a.plan.info["fill"] = {{"fraction", r.fill}, {"kappa", kappa}};
  } else if (!r.speed.empty() || r.memory_bytes) {
    std::optional<speed::CostTable> table;
    SpeedBudget sp;
    sp.memory_bytes = r.memory_bytes;
    sp.source = r.memory_source;
    if (sp.memory_bytes && !sp.source) return Status::error("--memory: the source's allocation was not measured");
    if (!r.speed.empty()) {
      GAMMA_ASSIGN_OR_RETURN(table, speed::CostTable::load(r.speed));
      // A budget named by a file whose types the table lacks (llama.cpp's Q3_K_S has attn_v at
      // Q3_K, a pool without Q3_K): those weights timed into the table, as gamma run does.
      std::optional<speed::CostModel> cm;
      GAMMA_ASSIGN_OR_RETURN(int added, speed::price_speed_targets(*table, m, r.min_decode, r.min_prefill, cm));
      if (added > 0) GAMMA_RETURN_IF_ERROR(table->save(r.speed));
      sp.table = &*table;
      GAMMA_ASSIGN_OR_RETURN(speed::SpeedTargets st, speed::speed_targets(r.min_decode, r.min_prefill, m, *table));
      sp.min_decode_tps = st.decode_tps;
      sp.min_prefill_tps = st.prefill_tps;
    }
    GAMMA_ASSIGN_OR_RETURN(a, alloc.solve(*r.budget, sp));
    if (table) {
      a.plan.info["speed"]["table"] = r.speed;
      a.plan.info["speed"]["min_decode_given"] = r.min_decode;
      a.plan.info["speed"]["min_prefill_given"] = r.min_prefill;
    }
  } else {
    GAMMA_ASSIGN_OR_RETURN(a, alloc.solve(*r.budget));
  }
  for (const auto& [k, v] : info.items()) a.plan.info[k] = v;
  out.plans.push_back(std::move(a));
  return out;
}

}  // namespace gm::solve
