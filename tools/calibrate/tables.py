"""The tables of a calibration: per scenario and case the verdict counts, the typical slowdown, the
band the sessions stated and what they said they could detect beside what they did; and the GPU
hours' runs replayed through the gate's protocol at slowdowns of 0 to 3%."""
from __future__ import annotations

import json
import math
import statistics

from perf_tests.core.rows import ABRow, Row, Side
from perf_tests.core.row_values import marked_runs_of, median_ips, row_of
from perf_tests.core.stats import t_interval
from perf_tests.judging.detectable import detects_text
from perf_tests.judging.paired import AB_TOLERANCE
from perf_tests.judging.protocol_replay import replay_sessions
from perf_tests.judging.tolerance_band import band_percent
from tools.cli import SUITE_ROOT

REPLAY_SHARES = (0.0, 0.01, 0.02, 0.03)


REPLAY_RUNS = (3, 5, 10)


RUN_SETS = "docs/gpu-hours/run-sets.json"


REPLAYED_SESSIONS = 500


REPLAY_HISTORY = 10   # the earlier sessions a replayed session's band learns from


# What each gate session said it could have detected (results.json; docs/verdicts.md), printed
# beside the regressions it did detect.
FIGURE = "min_detectable_slowdown"

# What calibration.json keeps of each gate session's row: the fields of the results row (its kind
# too, so that `row_of` reads it back as its type) that the tables and the progress lines read.
KEPT = ("kind", "verdict", "median_ips", "runs_ips", "cv", "delta", "tolerance", "ratio",
        "ratio_ci", "pairs", "ratio_of_medians", "marked_runs", FIGURE)


def kept_row(row: Row) -> dict:
    """What calibration.json keeps of a gate session's row: the KEPT fields it has (a null
    `min_detectable_slowdown` too), and of an A/B row each side's runs."""
    kept = {key: value for key, value in row.to_dict().items() if key in KEPT}
    if isinstance(row, ABRow):
        kept.update({name: {"runs_ips": list(side.runs_ips)} for name, side in
                     (("reference", row.reference), ("candidate", row.candidate))
                     if side != Side()})
    return kept


def summarize(scenario: str, gates: list[dict], baseline: dict | None) -> list[dict]:
    """Per case: the verdict counts, the typical slowdown (against the baseline, or in A/B the
    median of the sessions' ratios), and the runs a decision took (in A/B, per side)."""
    rows = []
    case_ids = sorted({case_id for gate in gates for case_id in gate["cases"]})
    for case_id in case_ids:
        rows_of_case = [row_of(case_id, gate["cases"][case_id]) for gate in gates
                        if case_id in gate["cases"]]
        verdicts = [row.verdict for row in rows_of_case]
        medians = [median_ips(row) for row in rows_of_case if median_ips(row)]
        ratios = [row.ratio for row in rows_of_case if isinstance(row, ABRow) and row.ratio]
        base = (baseline or {}).get("entries", {}).get(case_id, {}).get("median_ips")
        slowdown = (1 - statistics.median(medians) / base if medians and base
                    else 1 - statistics.median(ratios) if ratios else None)
        bands = [row.tolerance for row in rows_of_case if row.tolerance is not None]
        rows.append({"scenario": scenario, "case": case_id, "gate_runs": len(verdicts),
                     "slowdown": slowdown,
                     **{verdict: verdicts.count(verdict) for verdict in
                        ("regression", "host-unfit", "inconclusive", "pass", "improvement",
                         "error")},
                     "runs_per_gate": statistics.mean(len(row.runs_ips) for row in rows_of_case),
                     # the band the sessions stated (their median): what a slowdown must pass
                     "band": statistics.median(bands) if bands else None,
                     # the runs the host's state marked, of all the gates' runs: whether a
                     # scenario's load reached the timed windows at all
                     "marked_runs": sum(len(marked_runs_of(row)) for row in rows_of_case),
                     "all_runs": sum(len(row.runs_ips) for row in rows_of_case)})
        if ratios:
            rows[-1]["t_regression"] = sum(t_says_regression(row) for row in rows_of_case)
        figures = [row.min_detectable_slowdown for row in rows_of_case if row.detects_stated]
        if figures:
            rows[-1]["detects"] = median_figure(figures)
    return rows


def detects_cell(row: dict) -> str:
    """The sessions' median figure as the suite's tables show one; '-' where none stated it."""
    return detects_text({FIGURE: row["detects"]}) if "detects" in row else "-"


def median_figure(figures: list[float | None]) -> float | None:
    """The median of the sessions' `min_detectable_slowdown`, a session that could detect no
    slowdown (null) counted as larger than any; None where the median is such a session."""
    middle = statistics.median(math.inf if figure is None else figure for figure in figures)
    return None if math.isinf(middle) else middle


def t_says_regression(row: ABRow | dict) -> bool:
    """What a paired t interval on the log ratios would have called the same pairs: the A/B
    verdict's rule (whole interval below 1, ratio below the band) with the interval A/B did not
    choose, so the table shows both on one set of sessions."""
    row = row_of("", row)
    if not isinstance(row, ABRow):
        return False
    reference, candidate = row.reference.runs_ips, row.candidate.runs_ips
    pairs = min(len(reference), len(candidate))
    if pairs < 2 or not row.ratio:
        return False
    logs = [math.log(c / r) for r, c in zip(reference[:pairs], candidate[:pairs])]
    tolerance = row.tolerance or AB_TOLERANCE
    return math.exp(t_interval(logs)[1]) < 1 and row.ratio < 1 - tolerance


def print_table(rows: list[dict], baseline: dict) -> None:
    """The verdict counts, beside the regressions the median of what the sessions said they
    could have detected (`detects`); in A/B also what a paired t interval would have said of the
    same pairs (`t regression`), and the runs per side."""
    ab = any("t_regression" in row for row in rows)
    print()
    print("| scenario | case | slowdown | band | gate runs | regression | detects | host-unfit | "
          f"marked runs | inconclusive | pass | improvement | error | "
          f"{'runs per side' if ab else 'runs per gate'} |" + (" t regression |" if ab else ""))
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
          + ("---:|" if ab else ""))
    for row in rows:
        slowdown = f"{row['slowdown']:.1%}" if row["slowdown"] is not None else "-"
        band = band_percent(row["band"]) if row.get("band") is not None else "-"
        print(f"| {row['scenario']} | {row['case']} | {slowdown} | {band} | {row['gate_runs']} | "
              f"{row['regression']} | {detects_cell(row)} | {row['host-unfit']} | "
              f"{row['marked_runs']}/{row['all_runs']} | {row['inconclusive']} | "
              f"{row['pass']} | {row['improvement']} | {row['error']} | "
              f"{row['runs_per_gate']:.1f} |"
              + (f" {row.get('t_regression', '-')} |" if ab else ""))
    for case_id, entry in (baseline or {}).get("entries", {}).items():
        stored = entry.get("tolerance")
        print(f"baseline {case_id}: {entry['median_ips']:.2f} img/s, runs {entry['runs_ips']}, "
              f"cv {entry['cv']:.1%}, stored tolerance "
              f"{band_percent(stored) if isinstance(stored, float) else stored}")


def replay_pools() -> dict[str, list[float]]:
    """The GPU hours' runs, pooled by card, case and variant ('nvidia-h200 1n1g_amp_b256')."""
    document = json.loads((SUITE_ROOT / RUN_SETS).read_text())
    pools: dict[str, list[float]] = {}
    for session in document["sessions"]:
        variant = "" if session["variant"] == "eager" else f" {session['variant']}"
        pools.setdefault(f"{session['card']} {session['case']}{variant}", []).extend(
            session["runs_ips"])
    return pools


def print_replay(sessions: int, history: int = REPLAY_HISTORY) -> None:
    """For each pool of recorded GPU runs, sessions of 3, 5 and 10 runs slowed by 0-3%, each
    after `history` unchanged ones: the regressions among `sessions` replayed sessions, the runs
    they took, the band they stated."""
    print(f"replayed sessions per cell: {sessions}; each against a 10-run auto baseline from the "
          f"same pool ({RUN_SETS}), after {history} unchanged sessions its band learns from")
    print()
    print("| runs | pool | " + " | ".join(f"{share:.0%} slower" for share in REPLAY_SHARES)
          + " |")
    print("|---:|---|" + "---:|" * len(REPLAY_SHARES))
    for runs in REPLAY_RUNS:
        for name, pool in replay_pools().items():
            cells = []
            for share in REPLAY_SHARES:
                counts, replayed = replay_sessions(pool, runs, share, sessions, history=history)
                cells.append(f"{counts['regression'] / sessions:.0%} "
                             f"({statistics.mean(each.runs for each in replayed):.1f} runs, "
                             f"{band_percent(statistics.median(e.tolerance for e in replayed))})")
            print(f"| {runs} | {name} ({len(pool)} runs) | " + " | ".join(cells) + " |")
