"""Batch limits (`--perf-find-max-batch`): the largest batch per device that trains without
running out of memory, found by real runs, and its verdict against the baseline.

The search is perf_tests/modes/max_batch/search.py, a pure function over `probe(batch)`. The
`MaxBatch` mode runs it for one topology and precision, each probe a short real run through
the session's launcher, and judges the boundary against the baseline's
(perf_tests/modes/max_batch/verdict.py): a max batch that shrank is a regression, one that grew an
improvement. Its report section's tables are perf_tests/report/max_batch.py.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from perf_tests.cli.options import DEFAULT_BATCH_STEP, DEFAULT_MAX_BATCH_LIMIT
from perf_tests.cli.settings import SettingsError
from perf_tests.context.baseline_store import MAX_BATCH as MAX_BATCH_SECTION
from perf_tests.context.baseline_store import Lookup, Update
from perf_tests.core.cases import MAX_BATCH, Case
from perf_tests.core.cases import MAX_BATCH as KIND
from perf_tests.core.text import ips, memory_text, utc_now
from perf_tests.environment.differences import environment_diff
from perf_tests.judging.verdicts import OOM
from perf_tests.modes.base import Figure, Mode, Report
from perf_tests.modes.max_batch.search import Probe, Search, find_max_batch, run_outcome
from perf_tests.modes.max_batch.verdict import MaxBatchEntry, judge_max_batch
from perf_tests.report.max_batch import markdown_table, terminal_table
from perf_tests.report.plots import batch_plot
from perf_tests.report.tables import verdict_messages
from perf_tests.results.case_result import CaseResult
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.outcome import read_failures
from perf_tests.runs.protocol import run_rounds

# A probe is a short run: enough iterations for the optimizer state and the allocator's peak,
# not a measurement protocol (fewer where --perf-set warmup / iters or the profile say so).
PROBE_WARMUP_ITERS = 3
PROBE_TIMED_ITERS = 5


# -- what the session measures ----------------------------------------------------------------

@dataclass(frozen=True)
class MaxBatchSearch:
    """One search: a topology and precision, from the batch of the case it stands for. Its id,
    `1n1g_fp32_maxbatch`, is the test id (`-k 1n1g_fp32` selects it) and the key in
    results.json and in the baseline file's `max_batch` section."""
    case: Case

    @property
    def case_id(self) -> str:
        return f"{self.case.topology}_{self.case.precision}_maxbatch"

    # The case's layout, for the code that writes rows and picks launchers.
    nodes = property(lambda self: self.case.nodes)
    gpus_per_node = property(lambda self: self.case.gpus_per_node)
    precision = property(lambda self: self.case.precision)
    batch_per_device = property(lambda self: self.case.batch_per_device)
    devices = property(lambda self: self.case.devices)
    time_to_train = False  # a search measures memory, never convergence


def searches(cases: list[Case]) -> list[MaxBatchSearch]:
    """One search per topology and precision among the throughput `cases`, from its smallest
    batch (a time-to-train case asks for no search)."""
    first: dict[tuple, Case] = {}
    for case in (case for case in cases if not case.time_to_train):
        key = (case.nodes, case.gpus_per_node, case.precision)
        if key not in first or case.batch_per_device < first[key].batch_per_device:
            first[key] = case
    return [MaxBatchSearch(case) for case in first.values()]


@dataclass
class Plan:
    search: MaxBatchSearch
    entry: MaxBatchEntry | None
    no_entry_reason: str
    folder: ResultsFolder          # <results>/<search id>/: one case folder per probed batch
    warmup: int
    timed: int


@dataclass
class Found:
    search: Search
    seconds: float


class MaxBatch(Mode):
    """--perf-find-max-batch: instead of throughput, the largest batch that fits."""
    kind = KIND
    report = Report(terminal_table, (markdown_table, verdict_messages),
                    Figure(batch_plot, "batch.png", "ResNet50 v1.5 on {hardware}: img/s by batch"))

    @staticmethod
    def wanted(settings) -> bool:
        return settings.find_max_batch

    @staticmethod
    def check(settings) -> None:
        for flag, value in (("--perf-set batch-step", settings.batch_step),
                            ("--perf-set max-batch-limit", settings.max_batch_limit)):
            if value is not None and not settings.find_max_batch:
                raise SettingsError(f"{flag} applies to the max batch search; add "
                                    "--perf-find-max-batch")
        step = settings.batch_step or DEFAULT_BATCH_STEP
        limit = settings.max_batch_limit or DEFAULT_MAX_BATCH_LIMIT
        if limit < step:
            raise SettingsError(f"--perf-set max-batch-limit={limit} is below batch-step={step}; "
                                "raise the limit or lower the step")

    def cases(self) -> list[MaxBatchSearch]:
        settings = self.context.settings
        return searches(self.context.profile.cases(settings.precisions, settings.batches)
                        + list(settings.extra_cases))

    def skip_reason(self, search: MaxBatchSearch) -> str | None:
        return self.context.workers.skip_reason(search.case)

    # -- one search ------------------------------------------------------------------------

    def probe_iterations(self) -> tuple[int, int]:
        """(warm-up, timed) iterations of a probe: the command line's where given, else a
        short run, never longer than the profile's."""
        requested, profile = self.context.requested, self.context.profile
        warmup = requested.warmup_iters if requested.warmup_iters is not None else \
            min(PROBE_WARMUP_ITERS, profile.warmup_iters)
        timed = requested.timed_iters or min(PROBE_TIMED_ITERS, profile.timed_iters)
        return warmup, timed

    def plan(self, search: MaxBatchSearch) -> Plan:
        context = self.context
        context.workers.train_config(search.case).validate(context.host.device_type)
        entry, reason = context.baselines.lookup(
            search.case_id, context.stored.comparable(search.case, MAX_BATCH),
            section=MAX_BATCH_SECTION,
            names=Lookup(noun="max batch", recorded="the max batch", verb="searched",
                         record_with="--perf-find-max-batch --perf-update-baselines"),
            read=MaxBatchEntry.from_dict)
        warmup, timed = self.probe_iterations()
        return Plan(search, entry, reason, ResultsFolder(context.results.path / search.case_id),
                    warmup, timed)

    def probe(self, plan: Plan) -> Callable[[int], Probe]:
        """`probe(batch)`: one real run of the search's topology at `batch` through the
        session's launcher, its records under `<results>/<search id>/<case id at batch>/`."""
        context, search, folder = self.context, plan.search, plan.folder
        probed: list[int] = []

        def probe(batch: int) -> Probe:
            case = replace(search.case, batch_per_device=batch)
            # Whether a batch fits, not the fabric: no interconnect probe after the window.
            config = replace(context.workers.train_config(case), warmup_iters=plan.warmup,
                             timed_iters=plan.timed, interconnect_iters=0)
            request_for = context.workers.launch_requests(case, config,
                                                  folder.path / case.case_id / "config.json")
            started = time.monotonic()
            runs = run_rounds(case, context.launcher, request_for,
                              partial(folder.run_dir, case.case_id), 1, 1)
            seconds = time.monotonic() - started
            run = runs.runs[-1]
            if run.outcome == "ok":
                result = Probe(batch, "ok", int(run.record.get("peak_memory_bytes") or 0) or None,
                               run.global_ips, seconds=seconds)
            else:
                failures = read_failures(folder.run_dir(case.case_id, run.index), [])
                outcome = run_outcome({rank: failure.get("outcome", "error")
                                       for rank, failure in failures.items()}
                                      or {0: run.outcome})
                result = Probe(batch, outcome, message=run.message, seconds=seconds,
                               stderr_tail=tuple(run.stderr_tail))
            what = (f"{ips(result.ips)} img/s, peak memory {memory_text(result.peak_memory_bytes)}"
                    if result.outcome == "ok" and result.peak_memory_bytes else
                    "ran out of memory" if result.outcome == "oom" else result.outcome)
            probed.append(batch)
            context.progress(f"{search.case_id} probe {len(probed)}: batch {batch}: {what}")
            return result

        return probe

    def run(self, plan: Plan) -> Found:
        settings = self.context.settings
        started = time.monotonic()
        found = find_max_batch(self.probe(plan), plan.search.case.batch_per_device,
                               settings.batch_step, settings.max_batch_limit)
        return Found(found, time.monotonic() - started)

    def judge(self, plan: Plan, measured: Found) -> CaseResult:
        context, search, entry = self.context, plan.search, plan.entry
        found, seconds = measured.search, measured.seconds
        verdict, message = judge_max_batch(search.case_id, found, seconds, entry,
                                           plan.no_entry_reason)
        at_max = found.probe_at(found.max_batch)
        environment = context.host.environment
        record_path = next(iter(sorted(plan.folder.path.glob("*/run-1.json"))), None)
        if record_path is not None:
            environment = (json.loads(record_path.read_text()).get("record") or {}).get(
                "environment") or environment
        details = {
            "start_batch": search.case.batch_per_device,
            "batch_step": context.settings.batch_step, "max_batch_limit": found.limit,
            "max_batch": found.max_batch, "oom_batch": found.oom_batch,
            "limit_reached": found.limit_reached,
            "max_batch_ips": at_max.to_dict().get("ips") if at_max else None,
            "peak_memory_bytes": at_max.peak_memory_bytes if at_max else None,
            "probes": [probe.to_dict() for probe in found.probes],
            "search_seconds": round(seconds, 1), "probe_iters": [plan.warmup, plan.timed],
            "environment": environment,
            "settings": {**context.stored.recorded(search.case),
                         **self.context.stored.comparable(search.case, MAX_BATCH),
                         "warmup_iters": plan.warmup, "timed_iters": plan.timed}}
        if entry is not None:
            details["baseline_max_batch"] = entry.max_batch
            details["environment_diff"] = environment_diff(entry.environment, environment)
        tail = list(found.error.stderr_tail) if found.error else []
        return self.result(search, verdict, message, failure_tail=tail, baseline_entry=entry,
                           **details)

    def baseline_update(self, result: CaseResult) -> Update | None:
        """The search's boundary, for the baseline file's `max_batch` section."""
        if result.verdict == OOM:
            return None
        row = result.row
        figures = {"max_batch": row.max_batch, "oom_batch": row.oom_batch,
                   "limit_reached": row.limit_reached, "max_batch_ips": row.max_batch_ips,
                   "peak_memory_bytes": row.peak_memory_bytes, "probes": list(row.probes),
                   "environment": dict(result.environment), "settings": dict(row.settings)}
        entry = {key: value for key, value in figures.items() if value is not None}
        entry.update(recorded_at=utc_now(), source="measured")
        results_file = self.context.results.results_file

        def change(old: dict | None) -> str:
            return f"max batch {old['max_batch'] if old else 'none'} -> {entry['max_batch']}"

        def unwritten(why: str) -> str:
            return (f"the search's result is in {results_file}: rerun with "
                    "--perf-find-max-batch --perf-update-baselines to record it")

        return Update(MAX_BATCH_SECTION, entry, change, unwritten)
