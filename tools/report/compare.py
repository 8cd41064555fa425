"""Two sources compared, case by case: the delta of their medians, whether their runs differ (a
Mann-Whitney test), where the host marked runs, and what changed in the environment and the
settings between them."""
from __future__ import annotations

from pathlib import Path

from perf_tests.baselines.checks import unmarked_runs
from perf_tests.baselines.file import COMPARABLE_SETTINGS
from perf_tests.core.cases import THROUGHPUT
from perf_tests.core.rows import Row
from perf_tests.core.row_values import marked_runs_of, median_ips, rows_of, speed_of
from perf_tests.core.stats import mann_whitney_less
from perf_tests.core.text import aligned, formatted, markdown_lines
from perf_tests.environment.differences import WORKLOAD_SETTINGS, environment_diff, settings_diff
from perf_tests.judging.host_marks import marked_text
from perf_tests.judging.verdicts import ALPHA, mann_whitney_decides
from perf_tests.report.tables import Source, ips_or_verdict, is_measured, ordered
from tools.inputs import InputError

# What a comparison names when B's cases ran otherwise than A's: what is measured (a baseline's
# comparable settings) and how it runs (the workload settings a failure line names).
COMPARED_SETTINGS = COMPARABLE_SETTINGS[THROUGHPUT] + WORKLOAD_SETTINGS


def significance(first_runs, second_runs) -> str:
    """Whether B's runs differ from A's: the gate's own one-sided Mann-Whitney U test at its
    level, in each direction; '-' where either side has no runs."""
    first_runs, second_runs = list(first_runs or []), list(second_runs or [])
    if not first_runs or not second_runs:
        return "-"
    counts = f"{len(first_runs)}+{len(second_runs)} runs"
    if not mann_whitney_decides(second_runs, first_runs):
        return f"too few runs ({counts} cannot reach {ALPHA:.0%})"
    slower = mann_whitney_less(second_runs, first_runs)
    faster = mann_whitney_less(first_runs, second_runs)
    if slower <= ALPHA:
        return f"B slower (p {slower:.2g})"
    if faster <= ALPHA:
        return f"B faster (p {faster:.2g})"
    return f"not significant (p {min(slower, faster):.2g})"


def runs_differ(row: Row, other: Row) -> str:
    """Whether B's runs differ from A's (`significance`), on the runs the host did not mark where
    it marked some: a busy host's runs are not the stack's speed."""
    if not (marked_runs_of(row) or marked_runs_of(other)):
        return significance(row.runs_ips, other.runs_ips)
    clean = {name: unmarked_runs(one.runs_ips, marked_runs_of(one))
             for name, one in (("A", row), ("B", other))}
    unjudged = [name for name, runs in clean.items() if not runs]
    if unjudged:
        return f"not judged: the host marked every run of {' and '.join(unjudged)}"
    return f"{significance(clean['A'], clean['B'])}, unmarked runs"


def host_marked(row: Row, other: Row) -> str:
    """'B runs 1-3 of 3 (host-unfit)': the runs the host marked on either side; '-' for none."""
    sides = [f"{name} {text}" for name, one in (("A", row), ("B", other))
             if (text := marked_text(one))]
    return "; ".join(sides) or "-"


def comparison_rows(first: Source, second: Source) -> list[tuple[str, ...]]:
    """case, A img/s, B img/s, delta (B / A - 1), A speedup, B speedup, whether the runs
    differ and which runs the host marked, for ids in both."""
    rows, second_rows = [], rows_of(second.cases)
    for case_id, row in ordered(rows_of(first.cases)):
        other = second_rows.get(case_id)
        if other is None:
            continue
        delta, different = "-", "-"
        if is_measured(row) and is_measured(other):
            delta = f"{median_ips(other) / median_ips(row) - 1:+.2%}"
            different = runs_differ(row, other)
        rows.append((case_id, ips_or_verdict(row), ips_or_verdict(other), delta,
                     formatted(speed_of(row).speedup, "{:.2f}"),
                     formatted(speed_of(other).speedup, "{:.2f}"), different,
                     host_marked(row, other)))
    return rows


def settings_change(first: Source, second: Source) -> str:
    """'threads 2 -> 1' where every case in both changed alike; else each change with its cases
    ('threads 2 -> 1 (1n1g_fp32_b8); ...'); '' where none changed or no row records settings."""
    cases: dict[str, list[str]] = {}
    first_rows, second_rows = rows_of(first.cases), rows_of(second.cases)
    common = [case_id for case_id, _ in ordered(first_rows) if case_id in second_rows]
    for case_id in common:
        change = settings_diff(first_rows[case_id].settings, second_rows[case_id].settings,
                               COMPARED_SETTINGS)
        if change:
            cases.setdefault(change, []).append(case_id)
    if len(cases) == 1 and len(next(iter(cases.values()))) == len(common):
        return next(iter(cases))
    return "; ".join(f"{change} ({', '.join(ids)})" for change, ids in cases.items())


def environment_line(first: Source, second: Source) -> str:
    """'environment: driver 580.159 -> 590.10; settings: threads 2 -> 1' (B against A), as the
    gate's failure line names them; or which side records no environment."""
    missing = [name for name, source in (("A", first), ("B", second)) if not source.environment]
    if missing:
        line = f"environment: {' and '.join(missing)} record{'s' if len(missing) == 1 else ''} none"
    else:
        line = f"environment: {environment_diff(first.environment, second.environment)}"
    settings = settings_change(first, second)
    return f"{line}; settings: {settings}" if settings else line


def compare(first: Source, second: Source, first_path: Path, second_path: Path,
            ) -> tuple[list[str], str]:
    """The printed table and the Markdown of B against A."""
    rows = comparison_rows(first, second)
    if not rows:
        raise InputError(f"no case id is in both {first_path} ({', '.join(first.cases) or 'none'})"
                         f" and {second_path} ({', '.join(second.cases) or 'none'}); compare "
                         "results of the same cases (for extracted logs, name the precision in "
                         "--label)")
    header = ("case", "A img/s", "B img/s", "delta (B/A-1)", "A speedup", "B speedup",
              f"runs differ (Mann-Whitney, {ALPHA:.0%})", "host-marked runs")
    if all(row[-1] == "-" for row in rows):   # the column only where the host marked a run
        header, rows = header[:-1], [row[:-1] for row in rows]
    only = [f"only in {name}: {', '.join(sorted(set(one.cases) - set(other.cases)))}"
            for name, one, other in (("A", first, second), ("B", second, first))
            if set(one.cases) - set(other.cases)]
    legend = [f"A = {first.label} (`{first_path}`)", f"B = {second.label} (`{second_path}`)",
              environment_line(first, second)]
    printed = legend + [""] + aligned([header] + rows, {0}) + ([""] + only if only else [])
    markdown = ([f"# ResNet50 v1.5 training throughput: {second.label} against {first.label}",
                 ""] + [f"- {line}" for line in legend] + [""]
                + markdown_lines(header, rows, set(range(1, len(header))))
                + ([""] + [f"{line}." for line in only] if only else []))
    return printed, "\n".join(markdown) + "\n"
