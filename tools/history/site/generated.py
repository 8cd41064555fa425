"""Sessions of a stated shape, written as the suite writes them (a folder per session holding its
results.json), for the site's benchmark and tests: a history of the full profile's cases on one GPU
model, whose stack is upgraded at known sessions (torch, then the image and driver, then a variable,
with the workers' threads), each upgrade moving every case by a known factor, runs spread by a known
noise and judged against one baseline as the gate's band would (the last tenth's rows also measured
against the baseline's first entry: `drift`); each run's peak memory, which the image's upgrade
grows by `MEMORY_GROWTH`, beyond the memory gate's band (a memory regression whose speed alone
passes, as perf_tests/judging/footprint.py words it); every `ab_every`-th session an A/B one.
These are made-up figures of the suite's shape, not measurements."""
from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from perf_tests.results.document import RESULTS_FILE, SCHEMA_VERSION

HARDWARE = "nvidia-h200"
# The full profile's matrix: topology x (precision, batch).
TOPOLOGIES = [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8)]
PRECISIONS = [("amp", 256, 6100.0), ("fp32", 128, 1000.0)]
BASE_ENVIRONMENT = {"device": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0",
                    "cudnn": "91900", "nccl": "2.28.9", "torch": "2.11.0+cu130",
                    "python": "3.12.3", "os": "Ubuntu 24.04.3 LTS", "host": "gpu-node-1",
                    "image": "nvcr.io/nvidia/pytorch:26.09-py3 [docker: sha256:5f1e]",
                    "variables": {}}


@dataclass(frozen=True)
class Upgrade:
    at: float          # the fraction of the history where it lands
    changes: dict      # environment keys it changes (variables merged)
    scale: float       # what it does to every case's throughput


UPGRADES = (
    Upgrade(0.4, {"torch": "2.12.0+cu130"}, 0.92),
    Upgrade(0.7, {"image": "nvcr.io/nvidia/pytorch:26.11-py3 [docker: sha256:9c2a]",
                  "driver": "590.44.01", "nccl": "2.29.1"}, 1.05),
    Upgrade(0.85, {"variables": {"NCCL_ALGO": "Ring"}}, 0.97),
)
TOLERANCE = 0.05
# Peak memory per device (the largest rank's) by precision, and what the image's upgrade does to it.
PEAK_MEMORY = {"amp": 38 * 2**30, "fp32": 30 * 2**30}
MEMORY_GROWTH, MEMORY_TOLERANCE = 1.12, 0.10
COVERS = "timed window (after warm-up)"
THREADS_CHANGE = 0.85   # where the workers' threads go from 16 to 12, with the last upgrade


def case_ids(count: int) -> list[str]:
    ids = [f"{nodes}n{gpus}g_{precision}_b{batch}" for precision, batch, _ in PRECISIONS
           for nodes, gpus in TOPOLOGIES]
    return ids[:count]


def single_device_ips(case_id: str) -> float:
    return next(ips for precision, batch, ips in PRECISIONS if f"_{precision}_b{batch}" in case_id)


def memory_growth_at(fraction: float) -> float:
    """What the stack at this point of the history does to every case's peak memory."""
    return MEMORY_GROWTH if fraction >= UPGRADES[1].at else 1.0


def environment_at(fraction: float, commit: str) -> tuple[dict, float]:
    """The stack and the throughput factor at this point of the history."""
    environment, scale = json.loads(json.dumps(BASE_ENVIRONMENT)), 1.0
    for upgrade in UPGRADES:
        if fraction >= upgrade.at:
            for key, value in upgrade.changes.items():
                if key == "variables":
                    environment["variables"].update(value)
                else:
                    environment[key] = value
            scale *= upgrade.scale
    return {**environment, "commit": commit, "hardware": HARDWARE}, scale


def throughput_row(case_id: str, ips: float, rng: random.Random, runs: int, noise: float,
                   threads: int = 16, drift_since: str | None = None,
                   memory_growth: float = 1.0) -> dict:
    nodes, gpus = int(case_id.split("n")[0]), int(case_id.split("n")[1].split("g")[0])
    devices = nodes * gpus
    median_ips = ips * devices * 0.93 ** (devices > 1)
    runs_ips = [round(median_ips * rng.gauss(1.0, noise), 3) for _ in range(runs)]
    baseline = single_device_ips(case_id) * devices * 0.93 ** (devices > 1)
    median = statistics.median(runs_ips)
    delta = median / baseline - 1
    verdict = ("regression" if delta < -TOLERANCE else "improvement" if delta > TOLERANCE
               else "pass")
    precision = case_id.split("_")[1]
    row = {"kind": "throughput", "nodes": nodes, "gpus_per_node": gpus,
           "batch_per_device": int(case_id.split("_b")[1]), "precision": precision,
           "image_size": 224, "data_backend": "synthetic", "runs_ips": runs_ips,
           "median_ips": median, "cv": statistics.pstdev(runs_ips) / median,
           "baseline_ips": baseline, "delta": delta, "tolerance": TOLERANCE,
           "tolerance_reason": ("auto: 3 standard errors of the medians' difference, 0.5%; "
                                "the baseline's 10 runs scatter 0.4%"),
           "min_detectable_slowdown": TOLERANCE, "verdict": verdict,
           "settings": {"image_size": 224, "data_backend": "synthetic", "threads": threads,
                        "memory_format": "channels_last", "launcher": "local"},
           "marked_runs": {}}
    if verdict != "pass":
        row["message"] = (f"{case_id}: {median:.1f} img/s is {delta:+.1%} against the baseline "
                          f"{baseline:.1f} img/s (tolerance {TOLERANCE:.0%})")
    if drift_since:   # measured against the oldest entry of the baseline's lineage
        row["drift"] = {"delta": delta, "since": drift_since, "refreshes": 2,
                        "changed": "torch 2.11.0+cu130 -> 2.12.0+cu130, driver 580.159.04 -> "
                                   "590.44.01"}
    memory, regression = memory_figures(case_id, PEAK_MEMORY[precision] * memory_growth, rng,
                                        runs)
    row.update(memory)
    if regression:
        row.update(memory_regression=regression, throughput_verdict=verdict,
                   verdict="regression", message=regression)
    if devices > 1:
        runs_busbw = [round(rng.gauss(380.0, 4.0), 2) for _ in range(runs)]
        row.update(runs_busbw_gbps=runs_busbw, busbw_gbps=statistics.median(runs_busbw))
    return row


def memory_figures(case_id: str, peak: float, rng: random.Random,
                   runs: int) -> tuple[dict, str | None]:
    """Each run's peak memory about `peak` bytes, judged against the precision's as the memory
    gate judges it; and the regression's line, where it grew beyond the band (else None)."""
    runs_peak = [int(peak * rng.gauss(1.0, 0.002)) for _ in range(runs)]
    median, before = int(statistics.median(runs_peak)), PEAK_MEMORY[case_id.split("_")[1]]
    delta = median / before - 1
    clause = (f"peak memory (device memory, its largest rank) {before / 2**30:.1f} GiB -> "
              f"{median / 2**30:.1f} GiB ({delta:+.0%}, tolerance {MEMORY_TOLERANCE:.0%})")
    figures = {"runs_peak_memory_bytes": runs_peak, "peak_memory_bytes": median,
               "peak_memory_covers": COVERS, "baseline_peak_memory_bytes": before,
               "memory_delta": round(delta, 4), "memory_tolerance": MEMORY_TOLERANCE,
               "memory_clause": clause}
    return figures, f"{case_id}: {clause}" if delta > MEMORY_TOLERANCE else None


def ab_row(case_id: str, ips: float, rng: random.Random, pairs: int) -> dict:
    reference = [round(ips * rng.gauss(1.0, 0.005), 3) for _ in range(pairs)]
    candidate = [round(value * rng.gauss(0.9, 0.005), 3) for value in reference]
    ratio = statistics.median(c / r for c, r in zip(candidate, reference))
    return {"kind": "ab", "nodes": 1, "gpus_per_node": 1, "precision": case_id.split("_")[1],
            "batch_per_device": int(case_id.split("_b")[1]), "runs_ips": candidate,
            "median_ips": statistics.median(candidate), "ratio": ratio,
            "ratio_ci": [ratio - 0.01, ratio + 0.01], "pairs": pairs, "tolerance": TOLERANCE,
            "verdict": "regression" if ratio < 1 - TOLERANCE else "pass",
            "reference": {"runs_ips": reference, "median_ips": statistics.median(reference)},
            "candidate": {"runs_ips": candidate, "median_ips": statistics.median(candidate)},
            "environment_diff": "NCCL_ALGO unset -> Tree"}


def write_sessions(folder: Path, sessions: int, cases: int = 12, runs: int = 5,
                   noise: float = 0.005, ab_every: int = 100, commit_every: int = 10,
                   seed: int = 0) -> list[Path]:
    """`sessions` session folders in `folder` (named by their start, 8 hours apart); the
    suite's commit changes every `commit_every` sessions."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    written = []
    for number in range(sessions):
        started = start + timedelta(hours=8 * number)
        commit = f"{(number // commit_every + 1) * 7919:012x}"   # the suite's checkout
        environment, scale = environment_at(number / sessions, commit)
        document = {"schema_version": SCHEMA_VERSION, "hardware": HARDWARE, "profile": "full",
                    "launcher": "local", "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "environment": environment, "cases": {}}
        if ab_every and number % ab_every == ab_every - 1:
            document.update(reference="python /opt/torch/.venv/bin/python3",
                            candidate="NCCL_ALGO=Tree")
            for case_id in case_ids(cases)[:2]:
                document["cases"][case_id] = ab_row(case_id, single_device_ips(case_id) * scale,
                                                    rng, pairs=8)
        else:
            for case_id in case_ids(cases):
                document["cases"][case_id] = throughput_row(
                    case_id, single_device_ips(case_id) * scale, rng, runs, noise,
                    threads=16 if number < THREADS_CHANGE * sessions else 12,
                    drift_since="2026-01-01T00:00:00Z" if number >= 0.9 * sessions else None,
                    memory_growth=memory_growth_at(number / sessions))
        session = folder / started.strftime("%Y%m%d-%H%M%S")
        session.mkdir(parents=True)
        (session / RESULTS_FILE).write_text(json.dumps(document))
        written.append(session)
    return written
