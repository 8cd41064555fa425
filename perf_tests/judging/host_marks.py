"""What the worker recorded about the host during a run's window, as the suite reads it: a
run's marks (`host_busy`: other load and throttling on each host, what was off on each rank's GPU,
a GPU slowed down), the marked runs of a case (and of a results row, as the tools read them), and
the note on the runs whose GPU was slowed down.
"""
from __future__ import annotations

from perf_tests.core.rows import ABRow, Row, ThroughputRow
from perf_tests.core.row_values import row_of
from perf_tests.core.text import run_numbers
from perf_tests.judging.verdicts import HOST_UNFIT
from perf_tests.runs.outcome import RunOutcome
from rn50_model.gpu_fitness import SLOWDOWN_REASONS


def run_marks(run: RunOutcome) -> list[str]:
    """Why the host was unfit during this run's window, as the worker recorded it
    (`host_busy`: other load and throttling on each host, what was off on each rank's GPU, a
    GPU slowed down); empty for a clean run."""
    return list((run.record or {}).get("host_busy") or [])


def busy_tag(marks: list[str]) -> str:
    """' (host busy: other processes used 1.4 of 2 cores)': how a progress line names the marks
    of its run (or round); '' for a clean one."""
    return f" (host busy: {'; '.join(marks)})" if marks else ""


def marked_runs(runs: list[RunOutcome]) -> dict[int, list[str]]:
    """{run number: why} of the measured runs that were marked."""
    return {run.index: run_marks(run) for run in runs if run.outcome == "ok" and run_marks(run)}


def marked_text(row: Row | dict) -> str:
    """'runs 1-3 of 3 (host-unfit)': which of a results row's runs the host marked, and its
    verdict where that says so; '' where it marked none (a kind that marks no runs)."""
    row = row_of("", row)
    marked = row.marked_runs if isinstance(row, (ThroughputRow, ABRow)) else {}
    numbers = sorted(int(number) for number in marked)
    if not numbers:
        return ""
    text = f"run{'s' if len(numbers) > 1 else ''} {run_numbers(numbers)} of {len(row.runs_ips)}"
    return text + (f" ({HOST_UNFIT})" if row.verdict == HOST_UNFIT else "")


def throttling_note(runs: list[tuple[int, dict]]) -> str | None:
    """'the GPU was slowed down in runs 2, 4 (rank 3: hw_thermal_slowdown)', from the runs'
    records: every rank's state where the record has them, the reasons that slow a run only."""
    throttled = [(index, record) for index, record in runs if record.get("throttled")]
    if not throttled:
        return None
    causes: dict[str, set[int]] = {}
    for _, record in throttled:
        states = record.get("gpu_state_per_rank") or [record.get("gpu_state_during_window") or {}]
        for rank, state in enumerate(states):
            for reason in (state or {}).get("throttle_reasons", []):
                if reason in SLOWDOWN_REASONS:
                    causes.setdefault(reason, set()).add(rank)
    numbers = ", ".join(str(index) for index, _ in throttled)
    multi_rank = any(len(record.get("gpu_state_per_rank") or []) > 1 for _, record in throttled)
    why = ", ".join(
        (f"{reason} on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, sorted(ranks)))}"
         if multi_rank else reason) for reason, ranks in sorted(causes.items()))
    why = f" ({why})" if why else ""
    return f"the GPU was slowed down in run{'s' if len(throttled) > 1 else ''} {numbers}{why}"
