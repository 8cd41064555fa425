"""Sessions read into series: each results.json, session folder or folder of them (by start time),
and per case its points in session order (A/B cases, a candidate stack's, left out), with the runs
the host marked."""
from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perf_tests.baselines.checks import unmarked_runs
from perf_tests.core.cases import AB
from perf_tests.core.rows import Row
from perf_tests.core.row_values import judged_of, marked_runs_of, median_ips, row_of, rows_of
from perf_tests.core.text import counted
from perf_tests.environment.differences import IMAGE, NO_IMAGE
from perf_tests.judging.host_marks import marked_text
from perf_tests.results.history import results_files
from tools.inputs import InputError, read_results_file

# Settings a session records per case whose change is worth naming at a step.
SETTING_KEYS = ("image_size", "data_backend", "warmup_iters", "timed_iters", "memory_format",
                "threads", "loss_scale", "compile", "cuda_graphs", "launcher")

HOST_STACK = "host (no image)"


@dataclass
class Session:
    path: Path
    label: str       # when it started, to the minute: 2026-11-20T10:02
    document: dict
    rows: dict[str, Row] = field(init=False)   # the document's cases, typed once

    def __post_init__(self) -> None:
        self.rows = rows_of(self.document.get("cases") or {})


@dataclass
class Point:
    """One case in one session: its row typed (a dict, from a caller that still passes one, is
    typed by its `kind`)."""
    session: Session
    row: Row

    def __post_init__(self) -> None:
        self.row = row_of("", self.row)

    @property
    def runs(self) -> tuple[float, ...]:
        return self.row.runs_ips

    @property
    def median(self) -> float | None:
        return median_ips(self.row) if self.runs else None

    @property
    def marked_runs(self) -> Mapping[str, Any]:
        """The runs the host marked (run number -> why)."""
        return marked_runs_of(self.row)

    @property
    def baseline(self) -> float | None:
        """The baseline's median img/s the point was judged against."""
        return judged_of(self.row).baseline_ips

    @property
    def verdict(self) -> str:
        return self.row.verdict or "-"

    @property
    def unmarked(self) -> list[float]:
        """The runs the host did not mark: the stack's speed, as the host-unfit verdict reads
        it."""
        return unmarked_runs(self.runs, self.marked_runs)

    @property
    def stack_median(self) -> float | None:
        """The median of the unmarked runs: the point's place in the step search; None where
        the host marked every run (or none ran)."""
        return statistics.median(self.unmarked) if self.unmarked else None

    @property
    def stack(self) -> str:
        """The stack the session ran: the container image it names, or the host's own."""
        image = (self.session.document.get("environment") or {}).get(IMAGE)
        return image if image and image != NO_IMAGE else HOST_STACK


def session_label(path: Path, document: dict) -> str:
    started = document.get("started_at")
    return started[:16] if isinstance(started, str) and len(started) >= 16 else path.parent.name


def read_session(path: Path) -> Session:
    document = read_results_file(path)
    return Session(path, session_label(path, document), document)


def sessions_in(argument: Path) -> list[Session]:
    """A results.json, a session folder, or a folder of session folders (by start time)."""
    if not argument.is_dir():
        return [read_session(argument)]
    paths = results_files(argument)
    if not paths:
        raise InputError(f"input {argument} holds no results.json, nor do its folders; "
                         "pass a session folder or its results.json")
    return sorted((read_session(path) for path in paths),
                  key=lambda session: session.document.get("started_at") or "")


def is_ab(row: Row) -> bool:
    """An A/B case: a candidate stack's runs, paired with this stack's; no point of a history."""
    return row.kind == AB


def case_histories(sessions: list[Session]) -> dict[str, list[Point]]:
    """Per case id, its points in session order (sessions that did not run it, and A/B cases,
    left out)."""
    histories: dict[str, list[Point]] = {}
    for session in sessions:
        for case_id, row in session.rows.items():
            if not is_ab(row):
                histories.setdefault(case_id, []).append(Point(session, row))
    return dict(sorted(histories.items()))


def left_out_line(sessions: list[Session]) -> str | None:
    """'left out of the history: 2 A/B cases in 1 session (...)', or None where none was."""
    ab_counts = {}
    for session in sessions:
        count = sum(is_ab(row) for row in session.rows.values())
        if count:
            ab_counts[session.label] = ab_counts.get(session.label, 0) + count
    if not ab_counts:
        return None
    return (f"left out of the history: {counted(sum(ab_counts.values()), 'A/B case', 'A/B cases')}"
            f" in {counted(len(ab_counts), 'session', 'sessions')} ({', '.join(ab_counts)}), a "
            "candidate stack's runs paired with this stack's (--perf-candidate-*), not points "
            "of one stack's history")


def marked_lines(histories: dict[str, list[Point]]) -> list[str]:
    """'1n1g_fp32_b8: runs the host marked, left out of the step search: 2026-11-28T09:10
    runs 1-3 of 3 (host-unfit); ...', a line per case it marked runs of."""
    lines = []
    for case_id, points in histories.items():
        marked = [f"{point.session.label} {text}" for point in points
                  if (text := marked_text(point.row))]
        if marked:
            lines.append(f"{case_id}: runs the host marked, left out of the step search: "
                         f"{'; '.join(marked)}")
    return lines
