"""Whether measured runs may become a baseline entry: the one rule `--update-baselines` and
`tools/promote_baseline.py` both apply.

Every later verdict leans on a baseline's median, its runs and its speedup, so runs that cannot
be true or cannot be trusted are refused (recorded only with --force-baselines, or the
promotion tool's --force, and a line that says so):
- fewer runs than the profile records a baseline from;
- runs spread over `SPREAD_LIMIT` times the profile's tolerance (robust cv: one outlying run
  does not count), as on a host busy with other work;
- a scaling efficiency over `MAX_EFFICIENCY`: data-parallel training does not scale better than
  linearly, so such a speedup means its 1n1g reference ran slow.
"""
from __future__ import annotations

from .stats import summarize

MAX_EFFICIENCY = 1.10
SPREAD_LIMIT = 2.0


def refusals(runs_ips: list[float], *, wanted_runs: int, tolerance: float | None = None,
             speedup: float | None = None, devices: int = 1) -> list[str]:
    """Why these runs cannot be a baseline entry, one clause each; empty where they can. The
    spread is judged where a `tolerance` is given, the scaling where a `speedup` is."""
    reasons = []
    if len(runs_ips) < wanted_runs:
        reasons.append(f"{len(runs_ips)} run{'s' if len(runs_ips) != 1 else ''}, fewer than "
                       f"the {wanted_runs} a baseline is recorded from (leave --perf-runs out "
                       f"or give {wanted_runs})")
    if tolerance and len(runs_ips) >= 3:
        spread = summarize(runs_ips).robust_cv
        if spread > SPREAD_LIMIT * tolerance:
            reasons.append(f"its runs spread {spread:.0%} (robust cv), over {SPREAD_LIMIT:g}x "
                           f"the {tolerance:.0%} tolerance: a host busy with other work?")
    if speedup and devices > 1 and speedup / devices > MAX_EFFICIENCY:
        reasons.append(f"speedup {speedup:.2f} on {devices} devices is a scaling efficiency of "
                       f"{speedup / devices:.0%}, which cannot be true: its 1n1g reference "
                       f"ran slow")
    return reasons
