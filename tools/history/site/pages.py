"""The data the history site shows, built from its sources: every session, per hardware and case
a series of points (each session's runs, median and verdict, the band it was judged against, and
each other measure of the row with its own verdict: perf_tests/results/measures.py's table, so a
measure added there is drawn without naming it here), its step changes (tools.history.command's
search) and its baselines with their lineage and the band an auto entry judged with, and the A/B
sessions on their own. Environments and settings are stored once each and named by index; the
page's environment diff between two points follows `diff_rule`, the gate's own wording
(perf_tests/environment/differences.py), which the browser test holds to `environment_diff`.
"""
from __future__ import annotations

import json
from pathlib import Path

from perf_tests.baselines.file import AUTO
from perf_tests.core.cases import THROUGHPUT, Case, CaseIdError, row_kind
from perf_tests.core.rows import ABRow, Row, ThroughputRow, plain
from perf_tests.core.row_values import row_of
from perf_tests.environment.differences import ENVIRONMENT_KEYS, IMAGE, NO_CHANGE, NO_IMAGE
from perf_tests.results.measures import (JUDGED, MEASURES, Measure, MeasureValue, field_of,
                                         measures_of)
from perf_tests.runs.variables import UNSET, VARIABLES, is_compared
from tools.history.series import SETTING_KEYS, Point, case_histories
from tools.history.site.sources import Published, Sources
from tools.history.steps import find_steps, searched, step_search_problem

SITE_SCHEMA = 1
# A point's verdict on a chart of a measure the case was judged without (energy, where the case
# passed): it was recorded, not judged.
RECORDED = "recorded"
# Row fields a point carries as they are (the page shows them where present; a kind that does
# not declare one has none).
POINT_FIELDS = ("verdict", "delta", "tolerance", "tolerance_reason", "drift", "repro", "cv",
                "marked_runs", "throttled_runs", "busbw_gbps", "speedup", "top1",
                "reached_target", "oom_batch", "interrupted")
SIGNIFICANT = 5   # digits kept of a fraction (delta, tolerance): far below any run's noise
DECIMALS = 3      # of a measured figure (img/s, GB/s, s), as a baseline file keeps its runs


def measured(value):
    """An img/s (GB/s, s) figure to DECIMALS places (None as it is)."""
    return None if value is None else round(value, DECIMALS)


def figure(value):
    """A number rounded to SIGNIFICANT digits (None and non-numbers as they are)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return float(f"{value:.{SIGNIFICANT}g}")


class Table:
    """Values stored once each, named by their index."""

    def __init__(self) -> None:
        self.rows: list = []
        self._index: dict[str, int] = {}

    def index(self, value) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in self._index:
            self._index[key] = len(self.rows)
            self.rows.append(value)
        return self._index[key]


def environment_facts(environment: dict) -> dict:
    """What the gate's environment diff compares, as text: the image, ENVIRONMENT_KEYS and the
    compared variables (perf_tests/environment/differences.py, perf_tests/runs/variables.py)."""
    facts = {key: str(environment[key]) for key in (IMAGE, *ENVIRONMENT_KEYS)
             if key in environment}
    variables = environment.get(VARIABLES)
    if isinstance(variables, dict):
        facts[VARIABLES] = {name: str(value) for name, value in variables.items()
                            if is_compared(name) and value is not None}
    return facts


def setting_facts(settings: dict) -> dict:
    return {key: None if settings[key] is None else str(settings[key]) for key in SETTING_KEYS
            if key in settings}


def diff_rule() -> dict:
    """The constants of the gate's wording that the page's diff uses."""
    return {"image": IMAGE, "no_image": NO_IMAGE, "keys": list(ENVIRONMENT_KEYS),
            "named_when_unchanged": list(ENVIRONMENT_KEYS[:6]), "variables": VARIABLES,
            "unset": UNSET, "no_change": NO_CHANGE,
            "no_environment": "the baseline records no environment",
            "settings": list(SETTING_KEYS)}


class SiteBuilder:
    """Turns the sources into the page's data, one part at a time."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.environments = Table()
        self.settings = Table()
        self.session_index = {published.session.path: number
                              for number, published in enumerate(sources.sessions)}
        self.steps_note = step_search_problem()

    def data(self, built_at: str) -> dict:
        return {"schema_version": SITE_SCHEMA, "built_at": built_at,
                "notes": self.sources.notes, "steps_note": self.steps_note,
                "diff_rule": diff_rule(),
                "sessions": [self.session(published) for published in self.sources.sessions],
                "series": self.series(), "ab": self.ab_sessions(),
                "baseline_files": [str(baseline.path) for baseline in self.sources.baselines],
                "environments": self.environments.rows, "settings": self.settings.rows}

    # -- sessions ------------------------------------------------------------------------------

    def session(self, published: Published) -> dict:
        document = published.session.document
        environment = document.get("environment") or {}
        entry = {"name": published.name, "label": published.session.label,
                 "started_at": document.get("started_at"), "hardware": document["hardware"],
                 "profile": document.get("profile"), "launcher": document.get("launcher"),
                 "image": environment.get(IMAGE, NO_IMAGE),
                 "environment": self.environments.index(environment_facts(environment)),
                 "preflight": preflight_text(environment),
                 "files": session_files(published.session.path)}
        for key in ("reference", "candidate", "interrupted", "baseline_file"):
            if document.get(key):
                entry[key] = document[key]
        return entry

    # -- series --------------------------------------------------------------------------------

    def series(self) -> list[dict]:
        by_key: dict[tuple[str, str], dict] = {}
        rows: dict[tuple[str, str], list[tuple[int, Row]]] = {}
        for hardware, sessions in self.sessions_by_hardware().items():
            for case_id, points in case_histories(sessions).items():
                by_key[(hardware, case_id)] = self.one_series(hardware, case_id, points)
                rows[(hardware, case_id)] = [(self.session_index[point.session.path], point.row)
                                             for point in points]
        for baseline in self.sources.baselines:
            for case_id, raw in baseline.entries.items():
                key = (baseline.hardware, case_id)
                if key not in by_key:
                    by_key[key] = series_head(baseline.hardware, case_id, case_layout(case_id),
                                              row_kind(case_id, raw))
                    by_key[key]["measures"] = [described(primary(by_key[key]["kind"]))]
                by_key[key]["baselines"].append(
                    self.baseline_entry(baseline.path, case_id, raw, by_key[key]))
        for key, series in by_key.items():
            judged_bands(series, rows.get(key, []))
        return [by_key[key] for key in sorted(by_key)]

    def sessions_by_hardware(self) -> dict[str, list]:
        groups: dict[str, list] = {}
        for published in self.sources.sessions:
            groups.setdefault(published.session.document["hardware"], []).append(
                published.session)
        return groups

    def one_series(self, hardware: str, case_id: str, points: list[Point]) -> dict:
        first = points[0].row
        series = series_head(hardware, case_id, row_layout(first), first.kind)
        values = [{value.measure.slug: value for value in measures_of(case_id, point.row)}
                  for point in points]
        series["measures"] = [described(measure) for measure in MEASURES[series["kind"]]
                              if measure is primary(series["kind"])
                              or any(measure.slug in point for point in values)]
        series["points"] = [self.point(case_id, point, series["kind"], point_values)
                            for point, point_values in zip(points, values)]
        if series["kind"] == THROUGHPUT and not self.steps_note:
            series["steps"] = self.steps(case_id, points)
        return series

    def point(self, case_id: str, point: Point, kind: str,
              values: dict[str, MeasureValue]) -> dict:
        """The point's primary measure (the one its kind's verdict rests on) as `value`, `runs`,
        `baseline` and the case's fields; each other measure of the row under `measures`."""
        row, main = point.row, primary(kind)
        runs = field_of(row, main.runs_key) or () if main.runs_key else ()
        entry = {"session": self.session_index[point.session.path],
                 "value": measured(field_of(row, main.key)) if runs or not main.runs_key
                 else None,
                 "runs": [round(value, DECIMALS) for value in runs if value is not None]}
        entry.update({key: figure(value) for key in POINT_FIELDS
                      if (value := plain(field_of(row, key))) not in (None, "", [], {})})
        own = values.get(main.slug)
        if own is not None and own.baseline is not None:
            entry["baseline"] = measured(own.baseline)
        if own is not None and own.verdict and own.verdict != row.verdict:
            entry["measure_verdict"] = own.verdict   # the speed's own, where memory failed the case
        others = {slug: measure_figures(value, row) for slug, value in values.items()
                  if slug != main.slug}
        if others:
            entry["measures"] = others
        if row.min_detectable_slowdown is not None:
            entry["detects"] = figure(row.min_detectable_slowdown)
        if row.verdict != "pass" and row.message:
            entry["message"] = row.message
        if row.settings:
            entry["settings"] = self.settings.index(setting_facts(row.settings))
        files = run_files(point.session.path.parent / case_id)
        if files:
            entry["run_files"] = files
        return entry

    def steps(self, case_id: str, points: list[Point]) -> list[dict]:
        measured = searched(points)
        return [{"session": self.session_index[measured[step.index].session.path],
                 "before": self.session_index[measured[step.index - 1].session.path],
                 "change": figure(step.change), "what_changed": step.what_changed,
                 "state": step.state, "line": step.line}
                for step in find_steps(case_id, points)]

    def baseline_entry(self, path: Path, case_id: str, raw: dict, series: dict) -> dict:
        """A baseline file's entry for the series: its median, each measure it holds
        (`figures`, by the series' measures' slugs), its band (an auto one with the band the
        latest session judged against it used: `band`), its provenance, and its lineage, each
        item with its figures and band too."""
        entry = {"file": str(path), "median_ips": figure(raw["median_ips"]),
                 "runs": len(raw.get("runs_ips") or []),
                 "environment": self.environments.index(environment_facts(
                     raw.get("environment") or {}))}
        for key in ("tolerance", "recorded_at", "source", "speedup"):
            if raw.get(key) is not None:
                entry[key] = figure(raw[key])
        entry.update(entry_figures(case_id, raw, series))
        lineage = raw.get("lineage")
        if isinstance(lineage, list):
            entry["lineage"] = [{**{key: figure(value) for key, value in old.items()},
                                 **entry_figures(case_id, old, series)}
                                for old in lineage if isinstance(old, dict)]
        return entry

    # -- A/B -----------------------------------------------------------------------------------

    def ab_sessions(self) -> list[dict]:
        found = []
        for published in self.sources.sessions:
            cases = {case_id: row for case_id, row in published.session.rows.items()
                     if isinstance(row, ABRow)}
            if cases:
                found.append({"session": self.session_index[published.session.path],
                              "cases": [ab_case(case_id, row) for case_id, row in cases.items()]})
        return found


def primary(kind: str) -> Measure:
    """The measure a kind's verdict rests on: its series' main chart."""
    return MEASURES[kind][0]


def described(measure: Measure) -> dict:
    """A measure as the page names and draws it; `band_is_absolute` where its band is in its
    unit (baseline +- band), not a fraction of the baseline."""
    return {"slug": measure.slug, "title": measure.title, "unit": measure.unit,
            "lower_is_better": not measure.bigger_is_better, "gated": measure.gated,
            **({"band_is_absolute": True} if measure.band_is_absolute else {})}


def shown_verdict(value: MeasureValue, row: Row) -> str:
    """The verdict a measure's point is coloured by: the measure's own; where it was not judged,
    the case's where that says why (no-baseline, oom, error), else `recorded`."""
    if value.verdict:
        return value.verdict
    verdict = row.verdict
    return verdict if verdict and verdict not in JUDGED else RECORDED


def measure_figures(value: MeasureValue, row: Row) -> dict:
    """A measure of a point: its median, runs, baseline, delta, band and verdict (those the row
    has)."""
    figures = {"value": measured(value.value), "verdict": shown_verdict(value, row),
               "runs": [measured(run) for run in value.runs if run is not None],
               "baseline": measured(value.baseline), "delta": figure(value.delta),
               "tolerance": figure(value.tolerance)}
    return {key: item for key, item in figures.items() if item not in (None, [])}


def entry_figures(case_id: str, raw: dict, series: dict) -> dict:
    """`figures`: each measure of the series' kind that a baseline entry (or a lineage item)
    holds, by slug, in the measure's unit."""
    values = measures_of(case_id, {**raw, "kind": series["kind"]})
    return {"figures": {value.measure.slug: measured(value.value) for value in values}}


def judged_bands(series: dict, rows: list[tuple[int, Row]]) -> None:
    """Each auto entry of the series (and auto lineage item) gets `band`: the tolerance and
    reason of the latest session judged against it (the row whose baseline is its median), the
    band the gate derived from that session's runs and the entry's."""
    for entry in series["baselines"]:
        for item in [entry, *entry.get("lineage", [])]:
            if item.get("tolerance") != AUTO:
                continue
            judged = [(session, row) for session, row in rows
                      if isinstance(row, ThroughputRow) and is_number(row.tolerance)
                      and is_number(row.baseline_ips)
                      and figure(row.baseline_ips) == item["median_ips"]]
            if judged:
                session, row = judged[-1]
                item["band"] = {"tolerance": figure(row.tolerance), "session": session,
                                "reason": row.tolerance_reason}


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def series_head(hardware: str, case_id: str, layout: dict, kind: str = THROUGHPUT) -> dict:
    main = primary(kind)
    unit, lower_is_better = main.unit, not main.bigger_is_better
    topology = (f"{layout['nodes']}n{layout['gpus_per_node']}g" if layout.get("nodes")
                else None)
    return {"id": f"{hardware}/{case_id}", "hardware": hardware, "case_id": case_id,
            "kind": kind, "precision": layout.get("precision"), "topology": topology,
            "batch_per_device": layout.get("batch_per_device"), "unit": unit,
            "lower_is_better": lower_is_better, "measures": [], "points": [], "steps": [],
            "baselines": []}


def row_layout(row: Row) -> dict:
    """A row's nodes, devices, precision and batch, as `case_layout` gives a case id's."""
    return {"nodes": row.nodes, "gpus_per_node": row.gpus_per_node,
            "precision": row.precision or None, "batch_per_device": row.batch_per_device or None}


def case_layout(case_id: str) -> dict:
    """A case id's nodes, devices, precision and batch ({} where it does not parse)."""
    try:
        case = Case.parse(case_id)
    except CaseIdError:
        return {}
    return {"nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
            "precision": case.precision, "batch_per_device": case.batch_per_device}


def ab_case(case_id: str, row: ABRow | dict) -> dict:
    row = row_of(case_id, row)
    sides = {name: {"median_ips": figure(side.median_ips),
                    "runs": [figure(v) for v in side.runs_ips]}
             for name, side in (("reference", row.reference), ("candidate", row.candidate))}
    entry = {"case_id": case_id, **sides}
    figures = {"ratio": row.ratio, "ratio_ci": row.ratio_ci, "pairs": row.pairs,
               "tolerance": row.tolerance, "min_detectable_slowdown": row.min_detectable_slowdown,
               "verdict": row.verdict or None, "message": row.message or None,
               "environment_diff": row.environment_diff, "speedup_ratio": row.speedup_ratio,
               "repro": row.repro}
    for key, value in figures.items():
        if value is not None:
            entry[key] = [figure(v) for v in value] if isinstance(value, tuple) else figure(value)
    return entry


def preflight_text(environment: dict) -> str | None:
    preflight = environment.get("preflight")
    if not isinstance(preflight, dict):
        return None
    parts = []
    if preflight.get("loadavg"):
        parts.append(f"load average {preflight['loadavg']}")
    if preflight.get("gpus"):
        parts.append(f"{len(preflight['gpus'])} GPUs at rest")
    return ", ".join(parts) or None


def session_files(results: Path) -> list[str]:
    """The session's files the site copies and links: its report.md, where it has one."""
    return ["report.md"] * (results.parent / "report.md").is_file()


def run_files(case_folder: Path) -> list[str]:
    """The case's run records (`run-<k>.json`) in run order, where the session kept them."""
    if not case_folder.is_dir():
        return []
    records = [path.name for path in case_folder.glob("run-*.json")
               if path.stem.removeprefix("run-").isdigit()]
    return sorted(records, key=lambda name: int(name[4:-5]))
