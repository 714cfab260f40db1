#!/usr/bin/env python3
"""Validation's pick (issue 19's protocol), one place for iq_sweep.sh and goal_table.py: a file's
validation sum is its mean KLD on wiki.valid.tokens plus on python-calib.txt's held-back end
(results/iq_*/evals/NAME.wv.json and NAME.pv.json); the least sum is chosen.

  pick.py RESULTS PREFIX   prints "NAME SUM" for the least-sum variant among the plans
                           RESULTS/plans/PREFIX*.json that have both validation evals
"""
import os
import sys
import kept


def valid_sum(d, name):
    """wiki.valid + held-back python mean KLD of evals/NAME, or None without both."""
    paths = [os.path.join(d, "evals", f"{name}.{t}.json") for t in ("wv", "pv")]
    if not all(kept.exists(p) for p in paths):
        return None
    return sum(kept.load_json(p)["kld"]["mean"] for p in paths)


def best_variant(d, prefix):
    """(sum, name) of the least validation sum among the plans PREFIX*, or None."""
    best = None
    for plan in kept.glob(os.path.join(d, "plans", f"{prefix}*.json")):
        name = os.path.basename(plan)[: -len(".json")]
        s = valid_sum(d, name)
        if s is not None and (best is None or (s, name) < best):
            best = (s, name)
    return best


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: pick.py RESULTS PREFIX")
    b = best_variant(sys.argv[1], sys.argv[2])
    if b is None:
        sys.exit(f"pick.py: no plan {sys.argv[2]}* with both validation evals in {sys.argv[1]}")
    print(b[1], b[0])
