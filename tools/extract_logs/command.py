"""Turn ResNet50 training logs into throughput numbers per cluster shape (img/s, speedup over 1n1g).

Reads the logs of NGC PyTorch, pytorch/examples imagenet, MXNet gluon-cv and MindSpore runs laid out
as DLPerf lays them out and writes the same ``<log dir>_result.json`` that DLPerf's extraction
scripts do.

Layout: ``LOG_DIR/<N>n<G>g/*.log`` (e.g. ``1n8g/rn50_b128_fp32_1.log``), one file per run; a config
has N*G devices. Other folders and files that do not end in ``.log`` are ignored, and the format of
each file is recognised from its content (formats.py: how each framework's log gives its speed).
Every file yields one speed, for all devices together, over iterations W+1..T (``--warmup_batches
W``, ``--train_batches T``).

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

import json
import os
import re
import statistics
import sys
from pathlib import Path

from perf_tests.cli.values import whole_number
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.extract_logs.formats import LogError, Window, log_speed

MODEL_KEY = "rn50"
CONFIG_FOLDER = re.compile(r"(?P<nodes>\d+)n(?P<gpus_per_node>\d+)g")
# DLPerf names a run's log by its batch: rn50_b256_fp16_1.log (b256 or bs256 between _ or -).
FILE_NAME_BATCH = re.compile(r"(?:^|[_\-.])bs?(?P<batch>\d+)(?=[_\-.]|$)", re.IGNORECASE)


def check_file_name_batch(log_file: Path, batch_size_per_device: int) -> None:
    """A file whose name states another batch would get every speed scaled by the wrong batch."""
    stated = FILE_NAME_BATCH.search(log_file.stem)
    if stated and int(stated["batch"]) != batch_size_per_device:
        raise LogError(
            f"its name says batch {stated['batch']} per device, but --batch_size_per_device is "
            f"{batch_size_per_device}; extract it with --batch_size_per_device {stated['batch']} "
            "or move it out of the log folder"
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


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=verb_command("extract-logs"), description=__doc__.split("\n\n")[0])
    parser.add_argument("--log_dir", required=True,
                        help="folder holding the <N>n<G>g folders of *.log files")
    parser.add_argument("--warmup_batches", required=True, type=whole_number(0),
                        help="W: iterations 1..W are not measured")
    parser.add_argument("--train_batches", required=True, type=whole_number(1),
                        help="T: last measured iteration (> W)")
    parser.add_argument("--batch_size_per_device", required=True, type=whole_number(1),
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
