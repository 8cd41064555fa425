"""An image session's cost: the same session on the host as it is and inside images, in the run
loop's order round by round, and where each stack's time goes.

Each round runs one whole session per stack (`pytest perf_tests` with SESSION: the smoke
profile's 1n1g case, tiny, two runs; `--session-args` for another), then times, on each image,
what the session does before its first run: the runtime's check of the image and its identity
(for a root folder, its files' hash), the environment probe and the stack lock run inside it.
The table gives each stack's mean over the rounds: the session's wall time and its ratio to the
host's (the sums of all rounds), those parts, the runs from launch to end (their timed windows
apart) and the rest (pytest's start, collection, the host's description in the lock, the report).

    rn50-perf bench-image --image ROOT --image podman:ROOT --image docker:NAME --rounds 3
    rn50-perf bench-image --image / --image-python /opt/venv/bin/python3 \\
        --session-args "-k 1n1g_amp_b256 --perf-runs 2 --perf-set max-runs=2"          # GPU
    rn50-perf bench-image --identity ROOT          # a root folder's identity: first, cached

`--first` gives every image session an identity cache of its own, empty: the cost of the first
session on a new image. `--output FILE` also writes every session's figures as JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf_tests.cli.values import whole_number
from perf_tests.containers import RUNTIMES, ContainerError, check_image, identity, make_image
from perf_tests.environment.lock import stack_lock_of
from perf_tests.runs.host import ProbeError, probe_host
from perf_tests.runs.launch import Stack
from perf_tests.runs.protocol import round_order
from tools.cli import SUITE_ROOT, OneLineParser
from tools.command import verb_command

HOST = "host"
# The smoke profile's 1n1g case as the suite's own tests run it (tests/conftest.py's tiny case),
# two runs, judged against no baseline.
SESSION = ["-k", "1n1g_fp32", "--perf-set", "image-size=32", "--perf-set", "warmup=1",
           "--perf-set", "iters=2", "--perf-precisions", "fp32", "--perf-set", "threads=1",
           "--perf-runs", "2", "--perf-set", "max-runs=2", "--perf-explain", "never",
           "--perf-ignore-host-state"]
PARTS = ("check and identity", "environment probe", "stack lock", "runs", "timed windows",
         "rest")


def image_option(text: str) -> tuple[str | None, str]:
    """`[RUNTIME:]IMAGE`: a runtime named first where the text starts with one."""
    runtime, colon, name = text.partition(":")
    return (runtime, name) if colon and runtime in RUNTIMES else (None, text)


def session_seconds(stack: Stack, session_args: list[str], folder: Path,
                    cache: Path | None) -> dict:
    """One session on `stack`: its wall time, and its runs' launch-to-end and timed seconds
    (from their records)."""
    results = folder / "results"
    baseline = folder / "baseline.json"
    baseline.write_text('{"schema_version": 1, "entries": {}}\n')
    image = [] if stack.image is None else [
        "--perf-image", stack.image.name, "--perf-container-runtime", stack.image.runtime,
        "--perf-image-python", stack.image.python]
    env = None if cache is None else {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", str(SUITE_ROOT / "perf_tests"), "-q",
                           "-p", "no:cacheprovider", *session_args, *image, "--perf-results",
                           str(results), "--perf-baseline-file", str(baseline)],
                          cwd=SUITE_ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        last = (done.stdout.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench_image: the session on {stack.describe()} failed: {last}")
    runs = [json.loads(path.read_text()) for path in results.glob("*/run-*.json")]
    return {"session": wall, "runs": sum(run.get("launch_seconds") or 0 for run in runs),
            "timed windows": sum((run.get("record") or {}).get("elapsed_s") or 0
                                 for run in runs)}


@contextlib.contextmanager
def identity_cache(folder: Path | None):
    """Identities cached in `folder` while the block runs (None: where they are)."""
    saved = os.environ.get("XDG_CACHE_HOME")
    if folder is not None:
        os.environ["XDG_CACHE_HOME"] = str(folder)
    try:
        yield
    finally:
        if folder is not None and saved is None:
            os.environ.pop("XDG_CACHE_HOME")
        elif folder is not None:
            os.environ["XDG_CACHE_HOME"] = saved


def before_runs_seconds(stack: Stack, cache: Path | None) -> dict:
    """What a session does on `stack` before its first run, each part timed here as the session
    calls it: the check and identity (images only), the environment probe, the stack lock."""
    with identity_cache(cache):
        started = time.monotonic()
        if stack.image is not None:
            check_image(stack.image)
            identity(stack.image)
        checked = time.monotonic()
        probe_host(SUITE_ROOT, stack, "the stack")
        probed = time.monotonic()
        stack_lock_of(SUITE_ROOT, stack)
        locked = time.monotonic()
    return {"check and identity": checked - started, "environment probe": probed - checked,
            "stack lock": locked - probed}


def bench(stacks: dict[str, Stack], rounds: int, session_args: list[str], first: bool) -> dict:
    """Every round's figures, by stack."""
    figures: dict[str, list[dict]] = {name: [] for name in stacks}
    with tempfile.TemporaryDirectory(prefix="rn50-bench-image-") as work:
        for number in range(1, rounds + 1):
            for name in round_order(number, list(stacks)):
                # no ':' in a folder docker mounts (`-v SOURCE:TARGET`)
                folder = Path(work) / (re.sub(r"[^\w.-]", "_", name) + f"-{number}")
                folder.mkdir()
                # --first: the session, then the parts timed here, each with an empty cache
                fresh = [folder / "cache", folder / "cache-parts"] if first and \
                    stacks[name].image else [None, None]
                measured = {**session_seconds(stacks[name], session_args, folder, fresh[0]),
                            **before_runs_seconds(stacks[name], fresh[1])}
                measured["rest"] = measured["session"] - sum(
                    measured[part] for part in PARTS if part not in ("timed windows", "rest"))
                figures[name].append(measured)
                print(f"round {number} {name}: session {measured['session']:.1f} s", flush=True)
    return figures


def table(figures: dict[str, list[dict]]) -> list[str]:
    """Each stack's mean seconds per session and part; the ratio of summed sessions to the
    host's."""
    names = list(figures)
    width = max(12, *(len(name) for name in names))
    lines = [f"{'per session (mean s)':<22}" + "".join(f"{name:>{width + 2}}" for name in names)]
    host_total = sum(one["session"] for one in figures[HOST])
    lines.append(f"{'session':<22}" + "".join(
        f"{statistics.mean(one['session'] for one in figures[name]):>{width + 2}.1f}"
        for name in names))
    lines.append(f"{'vs host (summed)':<22}" + "".join(
        f"{sum(one['session'] for one in figures[name]) / host_total:>{width + 2}.3f}"
        for name in names))
    for part in PARTS:
        lines.append(f"{part:<22}" + "".join(
            f"{statistics.mean(one[part] for one in figures[name]):>{width + 2}.2f}"
            for name in names))
    return lines


def identity_seconds(root: str) -> int:
    """A root folder's identity with an empty cache, then twice from it."""
    with tempfile.TemporaryDirectory(prefix="rn50-identity-") as cache, \
            identity_cache(Path(cache)):
        image = make_image(root, "bwrap")
        for label in ("first (no cache)", "cached", "cached"):
            started = time.monotonic()
            found = identity(image)
            print(f"{label}: {time.monotonic() - started:.2f} s  {found}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=verb_command("bench-image"),
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", action="append", default=[], metavar="[RUNTIME:]IMAGE",
                        help="an image to compare with the host (repeatable); the runtime "
                             "first where it is not the one the image's kind takes")
    parser.add_argument("--image-python", metavar="PATH",
                        help="the interpreter inside the images (default python3)")
    parser.add_argument("--rounds", type=whole_number(1), default=3,
                        help="sessions per stack, in alternating order (default 3)")
    parser.add_argument("--session-args", type=shlex.split, default=SESSION, metavar="ARGS",
                        help="what follows `pytest perf_tests` (default: the tiny 1n1g case, "
                             "two runs)")
    parser.add_argument("--first", action="store_true",
                        help="every image session with an empty identity cache (a new image)")
    parser.add_argument("--identity", metavar="ROOT",
                        help="only time a root folder's identity, uncached then cached")
    parser.add_argument("--output", type=Path, help="also write every session's figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.identity:
        return identity_seconds(args.identity)
    stacks = {HOST: Stack()}
    try:
        for text in args.image:
            runtime, name = image_option(text)
            image = make_image(name, runtime, args.image_python)
            check_image(image)
            stacks[f"{image.runtime}:{Path(name).name or name}"] = Stack(image=image)
    except ContainerError as error:
        print(f"bench_image: {error}", file=sys.stderr)
        return 2
    try:
        figures = bench(stacks, args.rounds, args.session_args, args.first)
    except ProbeError as error:
        print(f"bench_image: {error}", file=sys.stderr)
        return 1
    print("\n".join(table(figures)))
    if args.output:
        args.output.write_text(json.dumps({"session_args": args.session_args,
                                           "first": args.first, "figures": figures},
                                          indent=2) + "\n")
    return 0
