// Exact multiple-choice knapsack: LP over convex hulls, reduced-cost fixing, and a Pareto
// dynamic programme with LP-bound pruning (in the spirit of Dyer-Zemel / Sinha-Zoltners for
// the LP and Pisinger's core algorithms for the integer part). See knapsack.h.
#include "solve/knapsack.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace gm::solve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Upper convex hull of efficient items (weight and score strictly ascending): the
// positions kept, so that the slopes between consecutive ones strictly decrease. Slopes are
// computed the same way the LP uses them, so the LP's ordering is consistent with the hull.
std::vector<uint32_t> upper_hull(const std::vector<uint64_t>& w, const std::vector<double>& p) {
  auto slope = [&](uint32_t a, uint32_t b) { return (p[b] - p[a]) / double(w[b] - w[a]); };
  std::vector<uint32_t> h;
  for (uint32_t j = 0; j < w.size(); ++j) {
    while (h.size() >= 2 && slope(h[h.size() - 2], h.back()) <= slope(h.back(), j)) h.pop_back();
    h.push_back(j);
  }
  return h;
}

// The LP relaxation of a changing set of classes as a function of spare capacity: hull
// increments in one global slope order inside a Fenwick tree, so a class leaves in
// O(log n) and the greedy LP value at any capacity costs O(log n).
class SuffixLp {
 public:
  explicit SuffixLp(std::vector<uint64_t> dw, std::vector<double> dp, std::vector<double> slope)
      : n_(dw.size()), w_(n_ + 1, 0), p_(n_ + 1, 0), slope_(std::move(slope)) {
    for (size_t i = 0; i < n_; ++i) {  // O(n) Fenwick build
      w_[i + 1] += dw[i];
      p_[i + 1] += dp[i];
      size_t parent = (i + 1) + ((i + 1) & -(i + 1));
      if (parent <= n_) {
        w_[parent] += w_[i + 1];
        p_[parent] += p_[i + 1];
      }
    }
    top_ = 1;
    while (top_ * 2 <= n_) top_ *= 2;
  }
  void remove(size_t i, uint64_t dw, double dp) {
    for (size_t k = i + 1; k <= n_; k += k & -k) {
      w_[k] -= dw;
      p_[k] -= dp;
    }
  }
  // max score gain of the remaining increments within `cap` extra bytes (fractional LP).
  double value(uint64_t cap) const {
    size_t pos = 0;
    double acc = 0;
    for (size_t step = n_ ? top_ : 0; step; step >>= 1) {
      if (pos + step <= n_ && w_[pos + step] <= cap) {
        pos += step;
        cap -= w_[pos];
        acc += p_[pos];
      }
    }
    // The next increment is live (removed ones weigh 0, so the descent would have taken it).
    if (pos < n_) acc += double(cap) * slope_[pos];
    return acc;
  }

 private:
  size_t n_, top_ = 0;
  std::vector<uint64_t> w_;
  std::vector<double> p_;
  std::vector<double> slope_;
};

}  // namespace

Result<Knapsack> Knapsack::create(std::vector<KnapsackClass> classes, KnapsackOptions opt) {
  if (classes.empty()) return Status::error("knapsack: no classes");
  if (!(opt.tolerance >= 0) || !std::isfinite(opt.tolerance))
    return Status::error("knapsack: tolerance must be a finite non-negative number");
  Knapsack k;
  k.opt_ = opt;
  uint64_t total_max = 0;
  double scale = 0;
  k.eff_begin_.push_back(0);
  for (size_t i = 0; i < classes.size(); ++i) {
    const auto& c = classes[i];
    if (c.weight.empty()) return Status::errorf("knapsack: class {} has no items", i);
    if (c.weight.size() != c.score.size())
      return Status::errorf("knapsack: class {} has {} weights but {} scores", i, c.weight.size(),
                            c.score.size());
    if (c.weight.size() > 65535) return Status::errorf("knapsack: class {} has too many items", i);
    uint64_t wmax = 0;
    double smax = 0;
    for (size_t j = 0; j < c.weight.size(); ++j) {
      if (!std::isfinite(c.score[j]))
        return Status::errorf("knapsack: class {} item {} has a non-finite score", i, j);
      wmax = std::max(wmax, c.weight[j]);
      smax = std::max(smax, std::fabs(c.score[j]));
    }
    if (__builtin_add_overflow(total_max, wmax, &total_max))
      return Status::error("knapsack: total weight overflows 64 bits");
    scale += smax;
    // Efficient items: by weight, then best score first; keep only strict improvements. An
    // item heavier and no better than another can be swapped for it in any solution.
    std::vector<int> idx(c.weight.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {
      if (c.weight[a] != c.weight[b]) return c.weight[a] < c.weight[b];
      if (c.score[a] != c.score[b]) return c.score[a] > c.score[b];
      return a < b;
    });
    std::vector<uint64_t> ew;
    std::vector<double> ep;
    for (int j : idx) {
      if (!ep.empty() && c.score[j] <= ep.back()) continue;
      ew.push_back(c.weight[j]);
      ep.push_back(c.score[j]);
      k.eff_item_.push_back(j);
    }
    k.min_weight_ += ew.front();
    k.min_score_ += ep.front();
    k.saturation_weight_ += ew.back();
    uint32_t base = k.eff_begin_.back();
    std::vector<uint32_t> hull = upper_hull(ew, ep);
    for (size_t h = 1; h < hull.size(); ++h) {
      uint32_t a = hull[h - 1], b = hull[h];
      uint64_t dw = ew[b] - ew[a];
      double dp = ep[b] - ep[a];
      k.inc_.push_back({uint32_t(i), b, dw, dp, dp / double(dw)});
    }
    k.eff_w_.insert(k.eff_w_.end(), ew.begin(), ew.end());
    k.eff_p_.insert(k.eff_p_.end(), ep.begin(), ep.end());
    k.eff_begin_.push_back(base + uint32_t(ew.size()));
  }
  // Within a class the slopes strictly decrease and ties keep hull order, so the global
  // greedy never takes a class's step before the one below it.
  std::stable_sort(k.inc_.begin(), k.inc_.end(), [](const Increment& a, const Increment& b) {
    if (a.slope != b.slope) return a.slope > b.slope;
    if (a.cls != b.cls) return a.cls < b.cls;
    return a.to < b.to;
  });
  k.inc_cw_.assign(k.inc_.size() + 1, 0);
  k.inc_cp_.assign(k.inc_.size() + 1, 0);
  for (size_t t = 0; t < k.inc_.size(); ++t) {
    k.inc_cw_[t + 1] = k.inc_cw_[t] + k.inc_[t].dw;
    k.inc_cp_[t + 1] = k.inc_cp_[t] + k.inc_[t].dp;
  }
  k.tol_abs_ = opt.tolerance * scale;
  k.classes_ = std::move(classes);
  return k;
}

// One solve: the scratch state of a single capacity.
class KnapsackRun {
 public:
  KnapsackRun(const Knapsack& k, uint64_t cap) : k_(k), cap_(cap), n_(k.classes_.size()) {}

  KnapsackSolution run(const std::vector<int>* warm) {
    t0_ = Clock::now();
    lp();
    incumbent_from(pos_);
    if (warm) {
      std::vector<uint32_t> w = from_input(*warm);
      if (!w.empty()) incumbent_from(w);
    }
    if (integral_) {
      ub_ = std::max(lp_, best_score_);
    } else {
      reduced_costs();
      prove();
    }
    return finish();
  }

 private:
  // Per class: the efficient positions still in play, flattened (one allocation, not n).
  struct Kept {
    struct Range {
      const uint32_t *b, *e;
      const uint32_t* begin() const { return b; }
      const uint32_t* end() const { return e; }
      size_t size() const { return size_t(e - b); }
      uint32_t operator[](size_t k) const { return b[k]; }
    };
    std::vector<uint32_t> start{0}, pos;
    Range operator[](size_t i) const { return {pos.data() + start[i], pos.data() + start[i + 1]}; }
  };
  struct DpOutcome {
    bool complete = true;
    double max_pruned = -std::numeric_limits<double>::infinity();  // bound of any pruned state
    double open_bound = -std::numeric_limits<double>::infinity();  // bound of unexplored states
    int free = 0;
  };

  uint32_t eb(size_t i) const { return k_.eff_begin_[i]; }
  uint32_t ecount(size_t i) const { return k_.eff_begin_[i + 1] - k_.eff_begin_[i]; }
  uint64_t ew(size_t i, uint32_t j) const { return k_.eff_w_[eb(i) + j]; }
  double ep(size_t i, uint32_t j) const { return k_.eff_p_[eb(i) + j]; }

  // Greedy over hull slopes: the LP optimum, its break slope, and the rounded-down choice.
  void lp() {
    pos_.assign(n_, 0);
    uint64_t x = cap_ - k_.min_weight_;
    size_t q = size_t(std::upper_bound(k_.inc_cw_.begin(), k_.inc_cw_.end(), x) - k_.inc_cw_.begin()) - 1;
    for (size_t t = 0; t < q; ++t) pos_[k_.inc_[t].cls] = k_.inc_[t].to;
    uint64_t rest = x - k_.inc_cw_[q];
    lp_ = k_.min_score_ + k_.inc_cp_[q];
    if (q == k_.inc_.size() || rest == 0) {
      integral_ = true;  // every class sits on a hull vertex: the LP optimum is integral
    } else {
      lambda_ = k_.inc_[q].slope;
      lp_ += double(rest) * lambda_;
    }
  }

  // Input choice -> efficient positions: an inefficient item is replaced by the best
  // efficient item no heavier (it scores at least as much). Empty if malformed.
  std::vector<uint32_t> from_input(const std::vector<int>& c) const {
    if (c.size() != n_) return {};
    std::vector<uint32_t> out(n_);
    for (size_t i = 0; i < n_; ++i) {
      const auto& cls = k_.classes_[i];
      if (c[i] < 0 || size_t(c[i]) >= cls.weight.size()) return {};
      uint64_t w = cls.weight[c[i]];
      uint32_t j = 0;
      while (j + 1 < ecount(i) && ew(i, j + 1) <= w) ++j;
      out[i] = j;
    }
    return out;
  }

  // Completes a choice greedily and keeps it if it beats the incumbent: one pass over the
  // hull steps in slope order taking every step that still fits (O(steps), however much
  // room is left), then a few rounds of the best affordable upgrade for what remains.
  void incumbent_from(std::vector<uint32_t> c) {
    uint64_t w = 0;
    for (size_t i = 0; i < n_; ++i) w += ew(i, c[i]);
    if (w > cap_) return;
    for (const auto& inc : k_.inc_) {
      uint32_t cur = c[inc.cls];
      if (cur >= inc.to) continue;
      uint64_t dw = ew(inc.cls, inc.to) - ew(inc.cls, cur);
      if (dw <= cap_ - w) w += dw, c[inc.cls] = inc.to;
    }
    for (int round = 0; round < 4; ++round) {
      uint64_t slack = cap_ - w;
      double best_gain = 0;
      uint64_t best_dw = 0;
      size_t bi = n_;
      uint32_t bj = 0;
      for (size_t i = 0; i < n_; ++i) {
        uint64_t w0 = ew(i, c[i]);
        double p0 = ep(i, c[i]);
        for (uint32_t j = c[i] + 1; j < ecount(i) && ew(i, j) - w0 <= slack; ++j) {
          double gain = ep(i, j) - p0;
          uint64_t dw = ew(i, j) - w0;
          if (gain > best_gain || (gain == best_gain && bi != n_ && dw < best_dw)) {
            best_gain = gain, best_dw = dw, bi = i, bj = j;
          }
        }
      }
      if (bi == n_) break;
      w += best_dw;
      c[bi] = bj;
    }
    double s = 0;
    for (size_t i = 0; i < n_; ++i) s += ep(i, c[i]);
    if (best_.empty() || s > best_score_) {
      best_ = std::move(c);
      best_score_ = s;
    }
  }

  // Lagrangian relaxation at the break slope lambda (its value equals the LP's): any
  // feasible x scores at most lag + sum_i r_i(x_i), with reduced costs r <= 0 measured from
  // the class's best item at lambda. Stored as rc_ = -r >= 0 per efficient item.
  void reduced_costs() {
    rc_.assign(k_.eff_w_.size(), 0);
    uint64_t wpos = 0;
    double ppos = 0, sum_max = 0;
    for (size_t i = 0; i < n_; ++i) {
      uint64_t w0 = ew(i, pos_[i]);
      double p0 = ep(i, pos_[i]);
      wpos += w0;
      ppos += p0;
      // Differences from the LP choice keep the magnitudes small (no cancellation).
      double m = 0;
      for (uint32_t j = 0; j < ecount(i); ++j) {
        rc_[eb(i) + j] = (ep(i, j) - p0) - lambda_ * (double(ew(i, j)) - double(w0));
        m = std::max(m, rc_[eb(i) + j]);
      }
      for (uint32_t j = 0; j < ecount(i); ++j) rc_[eb(i) + j] = m - rc_[eb(i) + j];
      sum_max += m;
    }
    lag_ = ppos + lambda_ * double(cap_ - wpos) + sum_max;
  }

  // Items that may still be part of a solution better than the incumbent: -r <= threshold
  // (the LP choice always stays).
  Kept items_within(double threshold, size_t* alternatives) const {
    Kept kept;
    kept.start.reserve(n_ + 1);
    kept.pos.reserve(n_ * 2);
    for (size_t i = 0; i < n_; ++i) {
      for (uint32_t j = 0; j < ecount(i); ++j) {
        if (j == pos_[i] || rc_[eb(i) + j] <= threshold) kept.pos.push_back(j);
      }
      kept.start.push_back(uint32_t(kept.pos.size()));
    }
    *alternatives = kept.pos.size() - n_;
    return kept;
  }

  // Expanding core (after Pisinger): exact DPs over the items nearest the LP break raise
  // the incumbent cheaply; a better incumbent fixes more items; the last round covers every
  // item that could still beat the incumbent, so its outcome is the proof.
  void prove() {
    const double tol = k_.tol_abs_;
    size_t core = 64;
    for (;;) {
      size_t alternatives = 0;
      Kept full = items_within(lag_ - best_score_ + tol, &alternatives);
      if (alternatives <= core || stopped()) {
        DpOutcome o = dp(full, k_.opt_.max_states);
        free_ = o.free;
        ub_ = std::max(best_score_, o.max_pruned);
        if (!o.complete) ub_ = std::max(ub_, o.open_bound);
        return;
      }
      std::vector<double> alt;
      for (size_t i = 0; i < n_; ++i)
        for (uint32_t j : full[i])
          if (j != pos_[i]) alt.push_back(rc_[eb(i) + j]);
      std::nth_element(alt.begin(), alt.begin() + (core - 1), alt.end());
      size_t dummy = 0;
      dp(items_within(alt[core - 1], &dummy), k_.opt_.max_states / 4);
      core *= 4;
    }
  }

  // Out of time; the state limit applies per DP (see dp), so the last round gets all of it.
  bool stopped() const { return seconds_since(t0_) > k_.opt_.max_seconds; }

  struct DpPlan {
    std::vector<uint32_t> order;  // the free classes, in the order the DP takes them
    uint64_t wfix = 0;            // weight and score of the classes with one kept item
    double pfix = 0;
    std::vector<uint64_t> minw, sdw;
    std::vector<double> minp, lagv, sdp;
    std::vector<uint32_t> inc_start, inc_at;
    std::optional<SuffixLp> suffix;
  };
  DpPlan dp_plan(const Kept& kept) const;
  DpOutcome dp(const Kept& kept, uint64_t max_states);
  void adopt_dp_incumbent(const Kept& kept, const std::vector<uint32_t>& order, long best_layer, long best_state,
                          const std::vector<uint32_t>& parent, const std::vector<uint16_t>& item,
                          const std::vector<size_t>& layer_at);
  KnapsackSolution finish();

  const Knapsack& k_;
  uint64_t cap_;
  size_t n_;
  Clock::time_point t0_;
  std::vector<uint32_t> pos_;  // LP choice rounded down (efficient positions)
  double lp_ = 0, lambda_ = 0, lag_ = 0;
  bool integral_ = false;
  std::vector<double> rc_;
  std::vector<uint32_t> best_;  // incumbent (efficient positions)
  double best_score_ = -std::numeric_limits<double>::infinity();
  double ub_ = -std::numeric_limits<double>::infinity();
  int free_ = 0;
  uint64_t states_ = 0;
};

// The DP's view of the classes with more than one kept item: their order, their lightest items,
// their best Lagrangian values, and the LP over their hull increments (for the bounds).
KnapsackRun::DpPlan KnapsackRun::dp_plan(const Kept& kept) const {
  const double ninf = -std::numeric_limits<double>::infinity();
  DpPlan d;
  std::vector<uint32_t>& order = d.order;
  for (size_t i = 0; i < n_; ++i) {
    if (kept[i].size() == 1) {
      d.wfix += ew(i, kept[i][0]);
      d.pfix += ep(i, kept[i][0]);
    } else {
      order.push_back(uint32_t(i));
    }
  }
  // Heaviest classes first, then the most decided ones: coarse weight steps early and fine
  // ones late keep the Pareto lists short (measured: ~5x fewer states than input order on
  // model-shaped instances), as sorting by size does in subset-sum DPs.
  std::vector<double> spread(n_, 0);
  for (uint32_t i : order)
    for (uint32_t j : kept[i]) spread[i] = std::max(spread[i], rc_[eb(i) + j]);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    uint64_t wa = ew(a, pos_[a]), wb = ew(b, pos_[b]);
    return wa != wb ? wa > wb : spread[a] > spread[b];
  });

  // Per free class: lightest kept item, best Lagrangian value, hull increments.
  struct Inc {
    uint32_t cls;
    uint64_t dw;
    double dp, slope;
  };
  std::vector<Inc> incs;
  d.minw.assign(n_, 0);
  d.minp.assign(n_, 0);
  d.lagv.assign(n_, 0);
  for (uint32_t i : order) {
    std::vector<uint64_t> w;
    std::vector<double> p;
    double best = ninf;
    for (uint32_t j : kept[i]) {
      w.push_back(ew(i, j));
      p.push_back(ep(i, j));
      best = std::max(best, ep(i, j) - lambda_ * double(ew(i, j)));
    }
    d.minw[i] = w.front();
    d.minp[i] = p.front();
    d.lagv[i] = best;
    auto hull = upper_hull(w, p);
    for (size_t h = 1; h < hull.size(); ++h) {
      uint64_t dw = w[hull[h]] - w[hull[h - 1]];
      double dp = p[hull[h]] - p[hull[h - 1]];
      incs.push_back({i, dw, dp, dp / double(dw)});
    }
  }
  std::stable_sort(incs.begin(), incs.end(), [](const Inc& a, const Inc& b) { return a.slope > b.slope; });
  d.sdw.resize(incs.size());
  d.sdp.resize(incs.size());
  std::vector<double> ssl(incs.size());
  // inc_at[inc_start[i] ..] = the sorted positions of class i's increments.
  d.inc_start.assign(n_ + 1, 0);
  d.inc_at.resize(incs.size());
  for (const Inc& in : incs) ++d.inc_start[in.cls + 1];
  for (size_t i = 0; i < n_; ++i) d.inc_start[i + 1] += d.inc_start[i];
  std::vector<uint32_t> fill(d.inc_start.begin(), d.inc_start.end() - 1);
  for (size_t r = 0; r < incs.size(); ++r) {
    d.sdw[r] = incs[r].dw, d.sdp[r] = incs[r].dp, ssl[r] = incs[r].slope;
    d.inc_at[fill[incs[r].cls]++] = uint32_t(r);
  }
  d.suffix.emplace(d.sdw, d.sdp, ssl);
  return d;
}

// The DP's incumbent as a full choice: the traced layers, the fixed classes, the rest at their
// LP choices; kept only if, rescored in class order, it beats the incumbent before it.
void KnapsackRun::adopt_dp_incumbent(const Kept& kept, const std::vector<uint32_t>& order, long best_layer,
                                     long best_state, const std::vector<uint32_t>& parent,
                                     const std::vector<uint16_t>& item, const std::vector<size_t>& layer_at) {
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<uint32_t> before = best_;
  std::vector<uint32_t> c(n_);
  for (size_t i = 0; i < n_; ++i) c[i] = kept[i].size() == 1 ? kept[i][0] : pos_[i];
  long s = best_state;
  for (long t = best_layer; t >= 0; --t) {
    c[order[t]] = kept[order[t]][item[layer_at[t] + s]];
    s = parent[layer_at[t] + s];
  }
  // Rescored in class order (the DP summed in another order); rounding must not let it
  // replace an incumbent it does not beat.
  auto score = [&](const std::vector<uint32_t>& x) {
    double sc = 0;
    for (size_t i = 0; i < n_; ++i) sc += ep(i, x[i]);
    return sc;
  };
  double sc = score(c), old = before.empty() ? ninf : score(before);
  best_ = sc >= old ? std::move(c) : std::move(before);
  best_score_ = std::max(sc, old);
}

// Dynamic programme over the classes with more than one kept item: layered lists of
// Pareto-optimal partial solutions (weight ascending, score strictly ascending), each
// pruned when an upper bound on its best completion cannot beat the incumbent by more than
// the tolerance. Completing a state with the LP choices of the remaining classes gives new
// incumbents on the way.
KnapsackRun::DpOutcome KnapsackRun::dp(const Kept& kept, uint64_t max_states) {
  const double tol = k_.tol_abs_;
  const double ninf = -std::numeric_limits<double>::infinity();
  DpOutcome out;
  DpPlan d = dp_plan(kept);
  const std::vector<uint32_t>& order = d.order;
  const uint64_t wfix = d.wfix;
  const double pfix = d.pfix;
  const std::vector<uint64_t>& minw = d.minw;
  const std::vector<uint64_t>& sdw = d.sdw;
  const std::vector<uint32_t>& inc_start = d.inc_start;
  const std::vector<uint32_t>& inc_at = d.inc_at;
  const std::vector<double>& minp = d.minp;
  const std::vector<double>& lagv = d.lagv;
  const std::vector<double>& sdp = d.sdp;
  SuffixLp& suffix = *d.suffix;
  out.free = int(order.size());
  // Sums over the classes not yet processed.
  uint64_t rest_minw = 0, rest_posw = 0;
  double rest_minp = 0, rest_lag = 0, rest_posp = 0;
  for (uint32_t i : order) {
    rest_minw += minw[i], rest_minp += minp[i], rest_lag += lagv[i];
    rest_posw += ew(i, pos_[i]), rest_posp += ep(i, pos_[i]);
  }
  // Upper bound on completions of (w, p): the Lagrangian one first (cheap), then the LP of
  // the remaining classes, which is never larger. False when it cannot beat the incumbent.
  auto promising = [&](uint64_t w, double p, double& bound) {
    bound = p + lambda_ * double(cap_ - w) + rest_lag;
    if (bound <= best_score_ + tol) return false;
    bound = p + rest_minp + suffix.value(cap_ - w - rest_minw);
    return bound > best_score_ + tol;
  };

  std::vector<uint64_t> W, nW;
  std::vector<double> P, nP;
  // Back-pointers of every state, layer after layer: layer t owns [layer_at[t], layer_at[t+1]).
  std::vector<uint32_t> parent;
  std::vector<uint16_t> item;
  std::vector<size_t> layer_at{0};
  std::vector<size_t> head;
  long best_layer = -2, best_state = -1;  // DP incumbent: layer (-1: root) and state
  double open = ninf;                     // max bound over the current list
  if (wfix + rest_minw <= cap_) {
    double b;
    if (promising(wfix, pfix, b)) {
      W.push_back(wfix), P.push_back(pfix), open = b;
      if (wfix + rest_posw <= cap_ && pfix + rest_posp > best_score_)
        best_score_ = pfix + rest_posp, best_layer = -1, best_state = 0;
    } else {
      out.max_pruned = b;
    }
  }
  const uint64_t start_states = states_;
  uint64_t generated = 0;
  for (size_t t = 0; t < order.size() && !W.empty() && out.complete; ++t) {
    if (states_ - start_states > max_states || stopped()) {
      out.complete = false;
      break;
    }
    uint32_t i = order[t];
    for (uint32_t q = inc_start[i]; q < inc_start[i + 1]; ++q) suffix.remove(inc_at[q], sdw[inc_at[q]], sdp[inc_at[q]]);
    rest_minw -= minw[i], rest_minp -= minp[i], rest_lag -= lagv[i];
    rest_posw -= ew(i, pos_[i]), rest_posp -= ep(i, pos_[i]);
    const auto items = kept[i];
    const size_t m = items.size();
    head.assign(m, 0);
    nW.clear(), nP.clear();
    double best_p = ninf, nopen = ninf;
    const uint64_t wlimit = cap_ - rest_minw;  // heavier states cannot be completed
    for (;;) {
      // k-way merge of the m shifted lists by (weight asc, score desc).
      size_t bj = m;
      uint64_t bw = 0;
      double bp = 0;
      for (size_t j = 0; j < m; ++j) {
        if (head[j] >= W.size()) continue;
        uint64_t w = W[head[j]] + ew(i, items[j]);
        double p = P[head[j]] + ep(i, items[j]);
        if (bj == m || w < bw || (w == bw && p > bp)) bj = j, bw = w, bp = p;
      }
      if (bj == m || bw > wlimit) break;
      size_t from = head[bj]++;
      if ((++generated & 4095) == 0 && (nW.size() > max_states || stopped())) {
        out.complete = false;  // the parents' bounds still cover everything unexplored
        break;
      }
      if (bp <= best_p) continue;  // dominated by a lighter-or-equal, better-or-equal state
      best_p = bp;
      double bound;
      if (!promising(bw, bp, bound)) {
        out.max_pruned = std::max(out.max_pruned, bound);
        continue;
      }
      nopen = std::max(nopen, bound);
      if (bw + rest_posw <= cap_ && bp + rest_posp > best_score_)
        best_score_ = bp + rest_posp, best_layer = long(t), best_state = long(nW.size());
      nW.push_back(bw), nP.push_back(bp);
      parent.push_back(uint32_t(from));
      item.push_back(uint16_t(bj));
    }
    if (!out.complete) break;
    layer_at.push_back(parent.size());
    std::swap(W, nW), std::swap(P, nP);
    states_ += W.size();
    open = nopen;
  }
  if (!out.complete) out.open_bound = open;
  if (best_layer != -2) adopt_dp_incumbent(kept, order, best_layer, best_state, parent, item, layer_at);
  return out;
}

KnapsackSolution KnapsackRun::finish() {
  KnapsackSolution s;
  s.choice.resize(n_);
  for (size_t i = 0; i < n_; ++i) {
    s.choice[i] = k_.eff_item_[eb(i) + best_[i]];
    s.weight += k_.classes_[i].weight[s.choice[i]];
    s.score += k_.classes_[i].score[s.choice[i]];
  }
  s.lp_bound = lp_;
  s.upper_bound = std::max(ub_, s.score);
  s.optimal = s.upper_bound - s.score <= k_.tol_abs_;
  s.free_classes = free_;
  s.states = states_;
  s.seconds = seconds_since(t0_);
  return s;
}

Result<KnapsackSolution> Knapsack::solve(uint64_t capacity, const std::vector<int>* warm) const {
  if (capacity < min_weight_)
    return Status::errorf("knapsack: capacity {} is below the minimum feasible weight {}", capacity,
                          min_weight_);
  return KnapsackRun(*this, capacity).run(warm);
}

std::vector<Result<KnapsackSolution>> Knapsack::sweep(const std::vector<uint64_t>& capacities) const {
  std::vector<size_t> idx(capacities.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return capacities[a] < capacities[b]; });
  std::vector<Result<KnapsackSolution>> out(capacities.size(), Status::error("not solved"));
  const std::vector<int>* warm = nullptr;
  for (size_t r : idx) {
    out[r] = solve(capacities[r], warm);
    if (out[r].is_ok()) warm = &out[r]->choice;
  }
  return out;
}

}  // namespace gm::solve
