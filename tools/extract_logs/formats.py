"""How each framework's training log gives one speed, for all devices together, over iterations
W+1..T (``--warmup_batches W``, ``--train_batches T``); the format of a log is recognised from its
content, the first of `LOG_FORMATS` with a matching line:

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
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Callable


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
