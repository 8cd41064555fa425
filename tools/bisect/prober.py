"""A list bisection's probes: each an A/B session of one case through the suite (the reference runs
the session, the candidate is a listed stack), its pairs and verdict read from the session's
results, its output streamed as it runs."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.cases import AB
from perf_tests.core.rows import ABRow
from perf_tests.core.storage import write_json_atomically
from perf_tests.report.ab import sides_of
from perf_tests.runs.launch import Stack
from tools.bisect.lines import RERUN_PAIRS, figures_text, ratio_of
from tools.bisect.rounds import (ProbeFailed)
from tools.bisect.rule import NOT_SLOW, NOT_SLOW_PRECISION, SLOW
from tools.bisect.search import (ProbeAnswer, Undecided)
from tools.cli import SUITE_ROOT
from tools.inputs import read_results_file

# A `pass` of a list's probe says "not slow" to the search only where its 95% interval's low end
# rules out a slowdown of half the one being bisected (the slow stack's ratio: a pass at 0.90
# or above against a 33% slowdown; `Prober.pass_precision`). Before any probe was slow, half of
# the smallest slowdown worth bisecting: 10%, as a component probe asks of the whole
# (tools/bisect/rule.py). At its cap A/B passes any ratio above its band, however wide the
# interval: on the busy VM 6 pairs of a 33% slowdown passed at ratio 1.005, interval 0.08-2.27
# (docs/bisect.md). Such a pass is run again, then reported as undecided. Only the low end
# counts: a burst on the reference's side widens the high end (0.952-3.47 after 16 pairs of two
# harmless settings), which says nothing about a slowdown.
PASS_PRECISION = NOT_SLOW_PRECISION

PROGRESS = re.compile(r"^\S+ pair \d")


# The A/B verdicts a probe can be decided from; any other (error, skip) measured nothing.
DECIDING = ("regression", "pass", "improvement", "inconclusive")


@dataclass
class Prober:
    """The probes of one bisection, each an A/B session of one case: the reference stack runs
    the session (its interpreter, its settings), the candidate is the layered or listed stack."""
    case_id: str
    reference: Stack
    pytest_args: list[str]
    work: Path
    pairs: int
    max_pairs: int
    log: dict
    # runs one A/B session (its command and settings) and returns its last lines of output
    run_session: Callable[[list[str], dict], str] = field(default=None)
    records: list[dict] = field(default_factory=list)
    # the ratio of the slowdown being bisected, once a probe measured it (`slowdown_found`)
    bisected_ratio: float | None = None

    def __post_init__(self) -> None:
        self.run_session = self.run_session or run_streaming

    def __call__(self, subject: str, candidate: Stack, members: list[str]) -> ProbeAnswer:
        number = len(self.records) + 1
        print(f"probe {number}: {subject}; candidate: {candidate.describe()}", flush=True)
        record = {"probe": number, "subject": subject, "members": members,
                  "candidate": candidate.describe(), "attempts": []}
        self.records.append(record)
        row = self.attempt(record, candidate, self.pairs, self.pairs)
        slow, why = self.decide(probe_figures(row))
        if slow is None and row.verdict in DECIDING:
            print(f"probe {number}: {why}; again with {RERUN_PAIRS} to {self.max_pairs} pairs",
                  flush=True)
            row = self.attempt(record, candidate, min(RERUN_PAIRS, self.max_pairs),
                               self.max_pairs)
            slow, why = self.decide(probe_figures(row))
        record.update(probe_figures(row))
        record["seconds"] = round(sum(a["seconds"] for a in record["attempts"]), 1)
        measured = row.verdict in DECIDING
        if measured and slow is None:
            record["verdict"] = "undecided"
        elif measured:
            record["answer"] = SLOW if slow else NOT_SLOW
        self.save()
        print(f"probe {number}: {row.verdict}, {figures_text(record)}, "
              f"{record['seconds']:.0f} s", flush=True)
        if not measured:
            message = row.message or f"verdict {row.verdict}"
            raise ProbeFailed(f"probe {number} ({subject}) measured nothing: {message}")
        if slow is None:
            raise Undecided(frozenset(members), f"probe {number} ({subject}) stayed {why}",
                            row.ratio)
        return ProbeAnswer(slow, row.ratio, record)

    def decide(self, figures: dict) -> tuple[bool | None, str]:
        """Slow (True), not slow (False), or undecided (None) with why, from a probe's figures
        as bisection.json keeps them (`probe_figures` of its A/B row), so that a recorded probe
        is decided again alike.

        Until a slowdown is measured, A/B's own answer: a regression is slow, a pass or an
        improvement whose interval rules out PASS_PRECISION is not. After, the question is
        which side of half the bisected slowdown the probe lies: its interval's low end above
        that line is not slow, whatever A/B's 5% band said (an `inconclusive` at 0.94 whose
        interval is 0.90-0.97 holds none of a 30% slowdown); a regression whose ratio is below
        the line is slow. Anything else needs more pairs.
        """
        verdict, ratio, pairs = figures.get("verdict"), figures.get("ratio"), figures.get("pairs")
        low = (figures.get("ratio_ci") or [None])[0]
        line = 1 - self.pass_precision
        reaches = f"its 95% interval reaches {low:.3f}" if low is not None else "no interval"
        if self.bisected_ratio is None or self.bisected_ratio >= 1:
            if verdict == "regression":
                return True, ""
            if verdict in ("pass", "improvement") and low is not None and low >= line:
                return False, ""
        else:
            if low is not None and low >= line:
                return False, ""
            if verdict == "regression" and ratio is not None and ratio < line:
                return True, ""
            if verdict == "regression":
                return None, (f"a regression after {pairs} pairs of {ratio_of(ratio, 3)}, "
                              f"less than half the slowdown bisected "
                              f"({self.bisected_ratio:.3f}), and {reaches}")
        if verdict == "inconclusive" and (low is None or low < line):
            return None, f"inconclusive after {pairs} pairs ({reaches})"
        return None, (f"a {verdict} after {pairs} pairs that does not rule out a slowdown of "
                      f"{self.pass_precision:.1%} ({reaches})")

    @property
    def pass_precision(self) -> float:
        """The slowdown a pass must rule out to answer "not slow": half the one bisected."""
        if self.bisected_ratio is None or self.bisected_ratio >= 1:
            return PASS_PRECISION
        return (1 - self.bisected_ratio) / 2

    def slowdown_found(self, answer: ProbeAnswer) -> None:
        """A slow probe whose ratio is the slowdown being bisected (the whole candidate's, or
        the latest slow stack's) sets what later passes must rule out."""
        if answer.slow and answer.ratio is not None:
            self.bisected_ratio = answer.ratio
            self.log["bisected_ratio"] = answer.ratio
            print(f"the slowdown bisected: ratio {answer.ratio:.3f}; a pass answers 'not slow' "
                  f"where its 95% interval rules out {self.pass_precision:.1%}", flush=True)

    def attempt(self, record: dict, candidate: Stack, pairs: int, max_pairs: int) -> ABRow:
        """One A/B session; its case's row of results.json (an error where it wrote none)."""
        folder = self.work / f"probe-{record['probe']}" / f"attempt-{len(record['attempts']) + 1}"
        command = [self.reference.python, "-m", "pytest", str(SUITE_ROOT / "perf_tests"), "-q",
                   "-p", "no:cacheprovider", "-k", self.case_id, "--perf-results", str(folder),
                   "--perf-runs", str(pairs), "--perf-set", f"max-runs={max_pairs}",
                   *candidate_options(candidate), *image_options(self.reference, candidate),
                   *self.pytest_args]
        started = time.monotonic()
        tail = self.run_session(command, dict(self.reference.env))
        seconds = time.monotonic() - started
        results = folder / "results.json"
        cases = (read_results_file(results, "probe results").get("cases", {})
                 if results.exists() else {})
        row = sides_of(self.case_id, cases.get(self.case_id) or {
            "kind": AB, "verdict": "error", "message": f"the session wrote no result for "
            f"{self.case_id} ({tail.strip() or 'no output'}); rerun it to see why: "
            f"{shlex.join(command)}"})
        record["attempts"].append({"command": shlex.join(command), "results": str(results),
                                   "seconds": round(seconds, 1), **probe_figures(row),
                                   "min_detectable_slowdown": row.min_detectable_slowdown})
        return row

    def save(self) -> None:
        self.log["probes"] = self.records
        write_json_atomically(self.work / "bisection.json", self.log)


def probe_figures(row: ABRow) -> dict:
    """What bisection.json keeps of a probe's A/B row: its verdict, ratio, interval and pairs."""
    return {"verdict": row.verdict or None, "ratio": row.ratio,
            "ratio_ci": list(row.ratio_ci) if row.ratio_ci else None, "pairs": row.pairs}


def candidate_options(candidate: Stack) -> list[str]:
    """The A/B options that make `candidate` the session's candidate (its interpreter: inside
    its image, the image's)."""
    return ((["--perf-candidate-image", candidate.image.name] if candidate.image
             else ["--perf-candidate-python", candidate.python])
            + (["--perf-candidate-prefix", shlex.join(candidate.prefix)] if candidate.prefix
               else [])
            + [f"--perf-candidate-env={key}={value}" for key, value in candidate.env])


def image_options(reference: Stack, candidate: Stack) -> list[str]:
    """The session's own image (the reference's) and the runtime and interpreter of both."""
    image = reference.image or candidate.image
    if image is None:
        return []
    return ([f"--perf-image={reference.image.name}"] if reference.image else []) + [
        f"--perf-container-runtime={image.runtime}", f"--perf-image-python={image.python}"]


def run_streaming(command: list[str], settings: dict) -> str:
    """Runs an A/B session, echoing its pair lines as they come; the last lines it wrote."""
    env = {**os.environ, **settings}
    tail: list[str] = []
    with subprocess.Popen(command, cwd=SUITE_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as session:
        for line in session.stdout:
            if PROGRESS.match(line):
                print(f"    {line.rstrip()}", flush=True)
            tail = (tail + [line])[-3:]
    return "".join(tail)
