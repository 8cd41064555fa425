"""The tools' way to run the workload: one worker run as the suite starts it (its agent, one
process per device, a fresh run folder), its record or its failure back as a dict, and the check
that a CUDA device is there at all; and the benches' shared parts: the workload's options,
interleaved pairs of two kinds of run, and the ratios those pairs add up to.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from perf_tests.cli.values import whole_number
from perf_tests.core.cases import Case
from perf_tests.runs.fork_servers import ServerFolder
from perf_tests.runs.host import worker_environment
from perf_tests.runs.launch import LaunchRequest, Stack
from perf_tests.runs.launchers import LocalLauncher
from perf_tests.runs.outcome import read_failures
from perf_tests.runs.protocol import round_order, run_rounds
from rn50_model.config import PRECISIONS
from tools.cli import SUITE_ROOT


class NeedsCuda(SystemExit):
    """A GPU tool started on a host without CUDA devices: one line on stderr, exit status 1."""

    def __init__(self, tool: str, why: str) -> None:
        super().__init__(f"{tool}: needs a CUDA device; {why} (run it on a GPU host)")
        self.why = why


def require_cuda(tool: str) -> int:
    """The number of CUDA devices torch sees, or NeedsCuda where there is none. Counting does
    not create a CUDA context in this process (torch asks NVML first)."""
    try:
        import torch
    except ImportError as error:
        raise NeedsCuda(tool, f"torch does not import ({error})") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        build = f"a CPU build of torch {torch.__version__}" if not torch.version.cuda else \
            f"torch {torch.__version__} with CUDA {torch.version.cuda}"
        raise NeedsCuda(tool, f"{build} sees none here")
    return count


def worker_run(settings: dict, nproc: int = 1, extra_env: dict[str, str] | None = None,
               timeout: float = 900, stack: Stack = Stack(),
               servers: ServerFolder | None = None) -> dict:
    """One run of the worker with these TrainConfig fields on `nproc` devices, through the
    suite's run loop and local launcher, on `stack` (an image: its workers inside it, the run's
    folder mounted; with `servers`, its workers forked by one of them, as a session's are):
    rank 0's record with the run's `phases` (perf_tests/runs/phases.py), else
    the first failing rank's failure record, else
    {"outcome": "error", "message": ...}. However it ends, no process it started outlives it
    (the launcher's process tree)."""
    case = Case(1, nproc, settings.get("precision", "fp32"), settings.get("batch_per_device", 1))
    env = {**worker_environment(SUITE_ROOT), **(extra_env or {})}
    with tempfile.TemporaryDirectory(prefix="rn50-worker-") as work:
        config = Path(work) / "config.json"
        config.write_text(json.dumps(settings))

        def request_for(run_dir: Path) -> LaunchRequest:
            return LaunchRequest(case, ["--config", str(config), "--run-dir", str(run_dir),
                                        "--redirect-logs"], run_dir, env, SUITE_ROOT, timeout,
                                 stack=stack, mounts=(Path(work),))

        run_dir = Path(work) / "run-1"
        run = run_rounds(case, LocalLauncher(servers), request_for, lambda index: run_dir, 1,
                         1).runs[-1]
        if run.outcome == "ok":
            return {**run.record, "phases": run.phases}
        failures = read_failures(run_dir, [])
        if failures:
            return min(failures.values(), key=lambda failure: failure.get("failed_at", 0))
        return {"outcome": "error", "message": run.message.removeprefix("run 1: ")}


def add_window_options(parser: argparse.ArgumentParser, warmup: int, iters: int,
                       each: str = "") -> None:
    """--warmup and --iters: the iterations a run warms up with and those it times (`each`: " a
    run" where the help says so), with their defaults."""
    parser.add_argument("--warmup", type=whole_number(0), default=warmup,
                        help=f"warm-up iterations{each} (default {warmup})")
    parser.add_argument("--iters", type=whole_number(1), default=iters,
                        help=f"timed iterations{each} (default {iters})")


def add_workload_options(parser: argparse.ArgumentParser, threads: int) -> None:
    """The options a bench takes for the training it times, `threads` being the default."""
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where to train (default cpu)")
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS,
                        help="(default fp32)")
    parser.add_argument("--batch", type=whole_number(1), default=8,
                        help="batch per device (default 8)")
    parser.add_argument("--image-size", type=whole_number(32), default=64,
                        help="pixels a side (default 64)")
    add_window_options(parser, warmup=3, iters=30)
    parser.add_argument("--threads", type=whole_number(1), default=threads,
                        help=f"CPU threads a process (default {threads})")
    parser.add_argument("--memory-format", default="channels_last",
                        choices=("channels_last", "contiguous"), help="(default channels_last)")
    parser.add_argument("--pairs", type=whole_number(1), default=7,
                        help="interleaved pairs (default 7)")
    parser.add_argument("--output", type=Path, help="also write the pairs and ratios as JSON here")


def workload_line(args: argparse.Namespace) -> str:
    return (f"{args.device} {args.precision} batch {args.batch} at {args.image_size} px, "
            f"{args.warmup} warm-up + {args.iters} timed iterations, {args.threads} threads, "
            f"{args.memory_format}")


def interleaved(pairs: int, reference: Callable[[], object],
                candidate: Callable[[], object]) -> Iterator[tuple[int, object, object]]:
    """`pairs` pairs of one reference and one candidate run: (pair, reference's result,
    candidate's result) as each pair ends, in the run loop's order (AB, BA, ...: `round_order`),
    so neither always runs on a warmer or colder machine and drift on a noisy one hits both
    alike."""
    kinds = {"reference": reference, "candidate": candidate}
    for pair in range(1, pairs + 1):
        ran = {kind: kinds[kind]() for kind in round_order(pair, list(kinds))}
        yield pair, ran["reference"], ran["candidate"]


def ratios(reference: list[float], candidate: list[float], names: tuple[str, str]) -> dict:
    """The pairs' img/s and what they add up to: candidate over reference, 1.00 meaning the same
    speed. `names` (reference's, candidate's) name the fields: {name}_ips, median_{name}_ips."""
    reference_name, candidate_name = names
    return {f"{reference_name}_ips": reference, f"{candidate_name}_ips": candidate,
            f"median_{reference_name}_ips": statistics.median(reference),
            f"median_{candidate_name}_ips": statistics.median(candidate),
            "ratio_of_medians": statistics.median(candidate) / statistics.median(reference),
            "median_pair_ratio": statistics.median(c / r for r, c in zip(reference, candidate))}
