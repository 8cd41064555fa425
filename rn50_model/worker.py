"""The training worker's entry point: one process per device, started by torchrun; one run.

It reads the command line into a `TrainConfig`, runs what it asks for (a throughput run,
timed_window.py; the interconnect probe alone, interconnect.py; training to a target,
convergence.py), and leaves the outcome as record.py says: rank 0 writes the run's record into
`--run-dir` and prints it on stdout behind `RN50_RECORD `; a rank that fails writes
`rank<N>.failure.json` and prints `RN50_FAILURE {...}`; running out of memory is the outcome
`oom`, not a crash. `RN50_FAULT` injects a fault (faults.py).

    torchrun --standalone --nproc-per-node 8 -m rn50_model.worker \\
        --run-dir runs/1n8g --precision amp --batch-per-device 256
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys
import time
import traceback
from pathlib import Path

import torch.distributed as dist

from .config import TrainConfig
from .convergence import ConvergenceConfig, train_to_target
from .failures import first_line, is_out_of_memory
from .faults import Fault
from .files import write_json_atomically
from .interconnect import interconnect_run
from .op_profile import SUMMARY_FILE
from .record import FAILURE_MARK, RECORD_FILE, RECORD_MARK, exit_code, failure_file, marked_line
from .run_clock import RunClock
from .startup import Placement, dist_initialized
from .timed_window import measure


def parse_arguments(argv: list[str] | None):
    parser = argparse.ArgumentParser(
        prog="python -m rn50_model.worker",
        description="Measure ResNet50 v1.5 training throughput (one process per device; "
                    "start it with torchrun).")
    parser.add_argument("--config", help="JSON file of TrainConfig fields (flags override it)")
    parser.add_argument("--run-dir", default=".", help="where record.json and failures go "
                        "(default: the current folder)")
    parser.add_argument("--redirect-logs", action="store_true",
                        help="send this rank's stdout and stderr to <run-dir>/rank<N>.log")
    parser.add_argument("--interconnect-only", action="store_true",
                        help="only the interconnect probe (rn50_model.interconnect), no training")
    parser.add_argument("--time-to-train", metavar="FILE",
                        help="instead of measuring throughput, train to a target top-1 "
                             "(rn50_model.convergence); FILE is a JSON of ConvergenceConfig "
                             "fields (default: not set)")
    for spec in dataclasses.fields(TrainConfig):
        flag = "--" + spec.name.replace("_", "-")
        if spec.type in ("bool", bool):
            parser.add_argument(flag, dest=spec.name, default=None,
                                action=argparse.BooleanOptionalAction)
        else:
            kind = {"int": int, "float": float}.get(str(spec.type).split(" ")[0], str)
            parser.add_argument(flag, dest=spec.name, default=None, type=kind,
                                help=f"default {spec.default}")
    return parser.parse_args(argv)


def build_config(arguments):
    config = TrainConfig.from_json_file(arguments.config) if arguments.config else TrainConfig()
    overrides = {spec.name: getattr(arguments, spec.name)
                 for spec in dataclasses.fields(TrainConfig)
                 if getattr(arguments, spec.name) is not None}
    return dataclasses.replace(config, **overrides)


def report_failure(run_dir: Path, placement: Placement, error: BaseException, console,
                   memory_limited: bool = False) -> int:
    failed_at = time.time()  # the first failure in time is the cause; later ones its echo
    outcome = "oom" if is_out_of_memory(error, memory_limited) else "error"
    # Source locations such as "[enforce fail at alloc_cpu.cpp:127] err == 0. " or
    # "[.../gloo/transport/tcp/pair.cc:553] " say nothing to a user.
    message = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*(?:err == 0\.\s*)?", "",
                     first_line(error))
    failure = {"rank": placement.rank, "node_rank": placement.node_rank, "outcome": outcome,
               "failed_at": failed_at, "error_type": type(error).__name__, "message": message,
               "traceback": traceback.format_exc()}
    try:
        write_json_atomically(run_dir / failure_file(placement.rank), failure)
    except OSError:
        pass  # the line on stdout below still carries it
    print(marked_line(FAILURE_MARK, failure), file=console, flush=True)
    traceback.print_exc()
    print(f"rank {placement.rank}: {outcome}: {failure['message']}", file=sys.stderr, flush=True)
    return exit_code(outcome)


def summary_line(record: dict, config, run_dir: Path) -> str:
    """Rank 0's last line: what the run measured."""
    if record.get("mode") == "interconnect":
        busbw = record.get("busbw_gbps")
        return (f"interconnect: busbw {busbw:.3g} GB/s over {record['world_size']} workers"
                if busbw is not None else f"interconnect: {record['interconnect']['skipped']}")
    what = ("profiled, not a measurement; operator profile and trace in "
            f"{run_dir}" if record.get("op_profile") else
            f"{config.precision}, batch {config.batch_per_device}, {config.image_size}px")
    return f"{record['global_ips']:.1f} img/s over {record['world_size']} workers ({what})"


def redirect_logs(run_dir: Path, rank: int):
    """`--redirect-logs`: this rank's stdout and stderr into <run-dir>/rank<N>.log from now on;
    the original stdout, returned, keeps the record line."""
    console = os.fdopen(os.dup(1), "w")
    log = os.open(run_dir / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    return console


def main(argv: list[str] | None = None) -> int:
    clock = RunClock()
    clock.mark("imported")
    arguments = parse_arguments(argv)
    placement = Placement.from_environment()
    run_dir = Path(arguments.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    console = redirect_logs(run_dir, placement.rank) if arguments.redirect_logs else sys.stdout
    config = None
    try:
        config = build_config(arguments)
        fault = Fault.from_environment(config.batch_per_device)
        if arguments.time_to_train:
            record = train_to_target(config, ConvergenceConfig.from_json_file(
                arguments.time_to_train), placement, run_dir)
        elif arguments.interconnect_only:
            record = interconnect_run(config, placement)
        else:
            record = measure(config, placement, fault, run_dir, clock)
    except Exception as error:
        return report_failure(run_dir, placement, error, console,
                              memory_limited=bool(config and config.memory_limit_bytes))
    finally:
        if dist_initialized():
            dist.destroy_process_group()
    if placement.rank == 0:
        clock.mark("ended")
        record["marks"] = clock.marks
        if record.get("op_profile"):
            write_json_atomically(run_dir / SUMMARY_FILE, record["op_profile"])
        write_json_atomically(run_dir / RECORD_FILE, record)
        print(marked_line(RECORD_MARK, record), file=console, flush=True)
        print(summary_line(record, config, run_dir), file=sys.stderr, flush=True)
    return 0


def exit_now(code: int) -> None:
    """End the worker once its record and failures are out: its logs and streams flushed, then
    `os._exit`, without the interpreter's teardown of torch's modules (about a second of every
    run's wall time on a CPU host, after the run; every file the run writes is closed by then)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
