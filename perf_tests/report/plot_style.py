"""How every figure of the reports draws: the styles of a baseline, a whisker and a run the host
marked, each verdict's colour (the scaling plot's, A/B's pair ratios, the history's), and the
exception that says why no figure was drawn."""
from __future__ import annotations


class NoPlot(Exception):
    """Why no scaling plot was drawn: nothing was measured, or matplotlib is not installed."""


# Throughputs spanning more than this factor (CPU figures beside published V100 ones) get a log
# axis: on a linear one the small bars are invisible.
LOG_SCALE_RATIO = 30
# Other node x device shapes of one device count (2n1g beside 1n2g) are drawn to the right of
# the line's point, each this many points further.
SHAPE_DODGE_POINTS = 14
# The baseline: a black tick on the speedup panel, a black bar across its case's bar.
BASELINE_STYLE = dict(color="black", marker="_", markersize=11, markeredgewidth=2.5,
                      linestyle="none", zorder=4)
# The runs' spread on a bar. The gate has no interval on one side's img/s (it tests the runs
# against the baseline's), so the whisker is the plain range of the runs.
WHISKER_LABEL = "whisker: slowest to fastest run"
WHISKER_STYLE = dict(fmt="none", ecolor="0.2", elinewidth=1.2, capsize=3, zorder=3.5)
WHISKER_LEGEND_STYLE = dict(color="0.2", marker="|", markersize=12, markeredgewidth=1.2,
                            linestyle="none")
# A run the host marked (busy, throttled) measured the host: a cross beside its bar, out of the
# whisker.
MARKED_LABEL = "a run the host marked (not in the whisker)"
MARKED_STYLE = dict(color="tab:brown", marker="x", markersize=6, linestyle="none", zorder=4)
# A legend label longer than this takes a column more room.
LONG_LABEL = 45
# Each verdict's colour wherever a figure marks verdicts (the history's, A/B's pair ratios).
VERDICT_COLOURS = {"pass": "tab:green", "regression": "tab:red", "improvement": "tab:blue",
                   "inconclusive": "tab:orange", "no-baseline": "tab:gray",
                   "not-comparable": "tab:purple",
                   "host-unfit": "tab:brown", "oom": "tab:pink", "error": "black",
                   "skipped": "tab:olive", "not-converged": "tab:cyan"}
OTHER_VERDICT_COLOUR = "0.6"


def verdict_colour(verdict: str) -> str:
    return VERDICT_COLOURS.get(verdict, OTHER_VERDICT_COLOUR)
