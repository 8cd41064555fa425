"""Turn ResNet50 training logs into throughput numbers per cluster shape (img/s, speedup over 1n1g).

Reads the logs of NGC PyTorch, pytorch/examples imagenet, MXNet gluon-cv and MindSpore runs laid out
as DLPerf lays them out and writes the same ``<log dir>_result.json`` that DLPerf's extraction
scripts do.

Layout: ``LOG_DIR/<N>n<G>g/*.log`` (e.g. ``1n8g/rn50_b128_fp32_1.log``), one file per run; a config
has N*G devices. Other folders and files that do not end in ``.log`` are ignored, and the format of
each file is recognised from its content. Every file yields one speed, for all devices together,
over iterations W+1..T (``--warmup_batches W``, ``--train_batches T``):

- NGC PyTorch (DLLogger, rank 0): devices * B * (T - W) / (wall-clock time between the lines of
  iterations W and T). The logged ``train.total_ips`` is not used. Iteration numbers are taken as
  printed; only lines with ``train.`` metrics (not validation lines, which reuse the numbers) of
  the first epoch in the file count.
- pytorch/examples imagenet (every rank prints): devices * B / mean of the per-iteration ``Time``
  over every line, of every rank, of iterations W+1..T of the first epoch.
- MXNet gluon-cv (rank 0 prints the speed of all devices): mean of the printed ``Speed`` over
  batches W+1..T of the first epoch.
- MindSpore data sink of S steps per sink epoch (ranks merged by mpirun): devices * B * steps /
  seconds over the sink epochs that lie wholly inside steps W+1..T, i.e. epochs e with
  (e-1)*S >= W and e*S <= T. A W that is not a multiple of S is rounded up and a T that is not is
  rounded down to the next sink boundary, so a partly warm or partly counted epoch never counts.
  Each ``epoch time`` line belongs to the nearest earlier ``epoch: e step: S`` line not yet taken,
  and an epoch's time is the mean over the ranks that printed it.

Per config: ``average_speed`` (mean over runs), ``median_speed``, ``speedup`` (median over the 1n1g
median, null when there is no usable 1n1g config) and ``batch_size_per_device``; speeds and speedup
are rounded to 2 places after computing them from unrounded values. The result is keyed by "rn50"
like DLPerf's, whatever the log file names say: this suite only trains ResNet50.

A file that matches no format, stops before iteration T, or whose name states another batch
than ``--batch_size_per_device`` (``rn50_b256_fp16_1.log``), is reported in one line and skipped;
the run fails only when no file yields a speed.

    rn50-perf extract-logs --log_dir logs/ngc/pytorch --warmup_batches 20 --train_batches 120 \\
        --batch_size_per_device 128 [--output_dir ./result]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from tools import moved_line
from tools.cli import OneLineParser
from tools.command import verb_command

MODEL_KEY = "rn50"
CONFIG_FOLDER = re.compile(r"(?P<nodes>\d+)n(?P<gpus_per_node>\d+)g")
# DLPerf names a run's log by its batch: rn50_b256_fp16_1.log (b256 or bs256 between _ or -).
FILE_NAME_BATCH = re.compile(r"(?:^|[_\-.])bs?(?P<batch>\d+)(?=[_\-.]|$)", re.IGNORECASE)


class LogError(Exception):
    """A log that cannot give a speed; the message says why and what to change, without the file
    name."""


@dataclass(frozen=True)
class Window:
    """The measured iterations W+1..T and how many images all devices process in one iteration."""

    warmup_batches: int
    train_batches: int
    images_per_iteration: int


@dataclass(frozen=True)
class LogFormat:
    """One framework's log lines: a pattern with named groups and how to turn its matches into
    img/s."""

    name: str
    pattern: re.Pattern[str]
    speed: Callable[[list[re.Match[str]], Window], float]


def _require_reached(last: int, window: Window, unit: str = "iteration") -> None:
    if last < window.train_batches:
        raise LogError(
            f"stops at {unit} {last}, before --train_batches {window.train_batches}; "
            f"lower --train_batches or rerun with more {unit}s"
        )


def _first_epoch(matches: list[re.Match[str]]) -> list[tuple[int, re.Match[str]]]:
    # Iteration numbers restart every epoch, so later epochs would count their iterations twice.
    first = matches[0]["epoch"]
    return [(int(m["iteration"]), m) for m in matches if m["epoch"] == first]


def _measured_lines(matches: list[re.Match[str]], window: Window) -> list[re.Match[str]]:
    """The first epoch's lines of iterations W+1..T, after checking the log reaches T."""
    iterations = _first_epoch(matches)
    _require_reached(max(i for i, _ in iterations), window)
    measured = [m for i, m in iterations if window.warmup_batches < i <= window.train_batches]
    if not measured:
        raise LogError(
            f"logs no iteration in {window.warmup_batches + 1}..{window.train_batches}; "
            "widen the window to include logged iterations"
        )
    return measured


def _ngc_speed(matches: list[re.Match[str]], window: Window) -> float:
    stamps: dict[int, str] = {}
    for iteration, m in _first_epoch(matches):
        # A repeated line (a restarted logger) must not move the start or end of the window.
        stamps.setdefault(iteration, m["stamp"])
    _require_reached(max(stamps), window)
    for iteration in (window.warmup_batches, window.train_batches):
        if iteration not in stamps:
            raise LogError(
                f"has no line for iteration {iteration}; choose --warmup_batches and "
                "--train_batches among the logged iterations"
            )
    seconds = (
        datetime.fromisoformat(stamps[window.train_batches])
        - datetime.fromisoformat(stamps[window.warmup_batches])
    ).total_seconds()
    if seconds <= 0:
        raise LogError(
            f"iteration {window.train_batches} is not logged after iteration "
            f"{window.warmup_batches}; "
            "check the timestamps"
        )
    return window.images_per_iteration * (window.train_batches - window.warmup_batches) / seconds


def _pytorch_examples_speed(matches: list[re.Match[str]], window: Window) -> float:
    seconds_per_iteration = statistics.fmean(
        float(m["seconds"]) for m in _measured_lines(matches, window)
    )
    return window.images_per_iteration / seconds_per_iteration


def _mxnet_speed(matches: list[re.Match[str]], window: Window) -> float:
    return statistics.fmean(float(m["speed"]) for m in _measured_lines(matches, window))


def _mindspore_speed(matches: list[re.Match[str]], window: Window) -> float:
    waiting: list[
        re.Match[str]
    ] = []  # "epoch: ... step:" lines whose "epoch time" line has not come yet
    seconds_by_epoch: dict[int, list[float]] = defaultdict(list)
    for m in matches:
        if m["epoch"] is not None:
            waiting.append(m)
        elif waiting:
            seconds_by_epoch[int(waiting.pop()["epoch"])].append(float(m["epoch_ms"]) / 1000)

    steps_per_epoch = {int(m["steps"]) for m in matches if m["steps"] is not None}
    if not steps_per_epoch:
        raise LogError(
            "has 'epoch time' lines but no 'epoch: E step: S, loss is' lines; check that "
            "LossMonitor was on"
        )
    if len(steps_per_epoch) > 1:
        raise LogError(
            f"prints step counts {sorted(steps_per_epoch)} instead of one sink size; "
            "only data-sink logs (dataset_sink_mode=True, fixed sink_size) can be read"
        )
    (steps,) = steps_per_epoch
    _require_reached(max(seconds_by_epoch, default=0) * steps, window, unit="step")

    first_epoch = -(-window.warmup_batches // steps) + 1
    last_epoch = window.train_batches // steps
    epochs = range(first_epoch, last_epoch + 1)
    if not epochs:
        raise LogError(
            f"has no whole sink epoch of {steps} steps inside steps "
            f"{window.warmup_batches + 1}..{window.train_batches}; widen the window"
        )
    missing = [e for e in epochs if e not in seconds_by_epoch]
    if missing:
        raise LogError(
            f"has no 'epoch time' line for sink epoch {missing[0]}; check that the run finished it"
        )
    seconds = sum(statistics.fmean(seconds_by_epoch[e]) for e in epochs)
    return window.images_per_iteration * len(epochs) * steps / seconds


# Tried in order; the first format with a matching line in a file reads that file.
LOG_FORMATS = (
    LogFormat(
        "NGC PyTorch",
        re.compile(
            r"DLL (?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) - "
            # Validation lines reuse the iteration numbers; only lines with train.* metrics time
            # training.
            r"Epoch: (?P<epoch>\d+) Iteration: (?P<iteration>\d+)\b(?=[^\n]*\btrain\.)"
        ),
        _ngc_speed,
    ),
    LogFormat(
        "pytorch/examples",
        re.compile(
            r"Epoch: \[(?P<epoch>\d+)\]\[\s*(?P<iteration>\d+)/\s*\d+\]\s+"
            r"Time\s+(?P<seconds>\d+(?:\.\d+)?)"
        ),
        _pytorch_examples_speed,
    ),
    LogFormat(
        "MXNet gluon-cv",
        # The module API's Speedometer prints a range "Batch [20-40]"; its end is the batch reached.
        re.compile(
            r"Epoch\[(?P<epoch>\d+)\]\s*Batch\s*\[(?:\d+-)?(?P<iteration>\d+)\]\s+"
            r"Speed:\s*(?P<speed>\d+(?:\.\d+)?) samples/sec"
        ),
        _mxnet_speed,
    ),
    LogFormat(
        "MindSpore",
        re.compile(
            r"epoch: (?P<epoch>\d+) step: (?P<steps>\d+), loss is"
            r"|epoch time: (?P<epoch_ms>\d+(?:\.\d+)?) ms"
        ),
        _mindspore_speed,
    ),
)


def check_file_name_batch(log_file: Path, batch_size_per_device: int) -> None:
    """A file whose name states another batch would get every speed scaled by the wrong batch."""
    stated = FILE_NAME_BATCH.search(log_file.stem)
    if stated and int(stated["batch"]) != batch_size_per_device:
        raise LogError(
            f"its name says batch {stated['batch']} per device, but --batch_size_per_device is "
            f"{batch_size_per_device}; extract it with --batch_size_per_device {stated['batch']} "
            "or move it out of the log folder"
        )


def log_speed(text: str, window: Window) -> float:
    """The img/s of one log's text, read by the first format that recognises it."""
    for log_format in LOG_FORMATS:
        matches = list(log_format.pattern.finditer(text))
        if matches:
            try:
                return log_format.speed(matches, window)
            except LogError as error:
                raise LogError(f"{log_format.name} log {error}") from None
    raise LogError(
        "matches no known log format (" + ", ".join(f.name for f in LOG_FORMATS) + "); "
        "move it out of the log folder or check that it is a training log"
    )


def _devices_and_nodes(config: str) -> tuple[int, int]:
    shape = CONFIG_FOLDER.fullmatch(config)
    nodes, gpus_per_node = int(shape["nodes"]), int(shape["gpus_per_node"])
    return nodes * gpus_per_node, nodes


def check_arguments(
    log_dir: str | os.PathLike, warmup_batches: int, train_batches: int, batch_size_per_device: int
) -> None:
    """Raise ValueError with a one-line message for arguments no log could satisfy."""
    if warmup_batches < 0 or train_batches < 0 or batch_size_per_device <= 0:
        raise ValueError(
            "--warmup_batches and --train_batches must be >= 0 and --batch_size_per_device > 0, "
            f"got {warmup_batches}, {train_batches}, {batch_size_per_device}"
        )
    if warmup_batches >= train_batches:
        raise ValueError(
            f"--warmup_batches {warmup_batches} must be smaller than --train_batches "
            f"{train_batches}"
        )
    if not Path(log_dir).is_dir():
        raise ValueError(
            f"--log_dir {log_dir} is not a directory; pass the folder holding the <N>n<G>g folders"
        )


def extract(
    log_dir: str | os.PathLike, warmup_batches: int, train_batches: int, batch_size_per_device: int
) -> tuple[dict, dict[str, float], list[str]]:
    """Read every run under log_dir.

    Returns ``({"rn50": {config: summary}}, {"<config>/<file>": img/s}, one-line errors)``, configs
    ordered by device count; the per-file speeds are unrounded. Raises ValueError for bad arguments.
    """
    check_arguments(log_dir, warmup_batches, train_batches, batch_size_per_device)
    log_dir = Path(log_dir)
    configs = sorted(
        (
            folder.name
            for folder in log_dir.iterdir()
            if folder.is_dir() and CONFIG_FOLDER.fullmatch(folder.name)
        ),
        key=_devices_and_nodes,
    )

    per_file_speeds: dict[str, float] = {}
    speeds_by_config: dict[str, list[float]] = {}
    errors: list[str] = []
    for config in configs:
        devices, _ = _devices_and_nodes(config)
        window = Window(warmup_batches, train_batches, devices * batch_size_per_device)
        for log_file in sorted((log_dir / config).glob("*.log")):
            run_name = f"{config}/{log_file.name}"
            try:
                check_file_name_batch(log_file, batch_size_per_device)
                speed = log_speed(log_file.read_text(errors="replace"), window)
            except (LogError, OSError) as error:
                errors.append(f"{log_file}: {error}")
                continue
            per_file_speeds[run_name] = speed
            speeds_by_config.setdefault(config, []).append(speed)

    baseline_median = (
        statistics.median(speeds_by_config["1n1g"]) if "1n1g" in speeds_by_config else None
    )
    summary = {}
    for config, speeds in speeds_by_config.items():
        median_speed = statistics.median(speeds)
        summary[config] = {
            "average_speed": round(statistics.fmean(speeds), 2),
            "median_speed": round(median_speed, 2),
            "speedup": round(median_speed / baseline_median, 2) if baseline_median else None,
            "batch_size_per_device": batch_size_per_device,
        }
    return {MODEL_KEY: summary}, per_file_speeds, errors


def result_file(log_dir: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    """``OUT/<last part of log_dir>_result.json``; abspath so "logs/" and "." still have a last
    part."""
    return Path(output_dir) / f"{Path(os.path.abspath(log_dir)).name}_result.json"


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=verb_command("extract-logs"), description=__doc__.split("\n\n")[0])
    parser.add_argument("--log_dir", required=True,
                        help="folder holding the <N>n<G>g folders of *.log files")
    parser.add_argument("--warmup_batches", required=True, type=_count(0),
                        help="W: iterations 1..W are not measured")
    parser.add_argument("--train_batches", required=True, type=_count(1),
                        help="T: last measured iteration (> W)")
    parser.add_argument("--batch_size_per_device", required=True, type=_count(1),
                        help="B: images per device per iteration")
    parser.add_argument("--output_dir", default="./result",
                        help="where <log dir name>_result.json goes (default ./result)")
    args = parser.parse_args(argv)

    try:
        summary, per_file_speeds, errors = extract(
            args.log_dir, args.warmup_batches, args.train_batches, args.batch_size_per_device
        )
    except ValueError as error:
        parser.error(str(error))

    for error in errors:
        print(error, file=sys.stderr)
    if not per_file_speeds:
        print(
            f"{parser.prog}: error: no log under {args.log_dir} gave a speed; "
            "check the lines above and that it holds <N>n<G>g/*.log folders",
            file=sys.stderr,
        )
        return 1

    for run_name, speed in per_file_speeds.items():
        print(f"{run_name}: {speed:.2f} img/s")
    print()
    print(
        f"{'config':<8} {'average_speed':>14} {'median_speed':>13} {'speedup':>8} "
        f"{'batch_size_per_device':>22}"
    )
    for config, numbers in summary[MODEL_KEY].items():
        speedup = "n/a" if numbers["speedup"] is None else f"{numbers['speedup']:.2f}"
        print(
            f"{config:<8} {numbers['average_speed']:>14.2f} {numbers['median_speed']:>13.2f} "
            f"{speedup:>8} {numbers['batch_size_per_device']:>22}"
        )

    output_file = result_file(args.log_dir, args.output_dir)
    output_file.parent.mkdir(parents=True, exist_ok=True)
    output_file.write_text(json.dumps(summary, indent=4) + "\n")
    print(f"\nwrote {output_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(moved_line("extract_logs"))
