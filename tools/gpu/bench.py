"""Everything the H200 issue measures, in one command on a CUDA host.

1. Throughput of every precision and batch at 1n1g (synthetic data, channels_last), with model
   FLOPs utilization against the card's own measured matmul rate in the precision's compute
   dtype: fp32 (TF32 off) against fp32, tf32 against tf32, amp against fp16, bf16 against bf16.
2. Optimization ratios, each against the default configuration in the same call: contiguous
   vs channels_last, cudnn.benchmark off, foreach and for-loop SGD vs fused, torch.compile,
   CUDA graphs.
3. Input pipeline: the torch DataLoader backend (torchvision, this host's cores) vs synthetic,
   to see whether real data would starve the GPU.
4. Optionally the first baseline: `--record-baseline` runs the suite's full-profile 1n1g cases
   with --perf-update-baselines into baselines/<hardware key>.json.

Each measurement is one worker run (the suite's agent, one process), exactly as the suite starts it.
Results go to stdout as tables and to `--output` as JSON.

    rn50-perf gpu-bench --iters 100 --output gpu_bench.json [--record-baseline]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from perf_tests.cli.values import batch_list, precision_list, whole_number
from perf_tests.core.cases import FULL
from perf_tests.core.text import markdown_lines
from perf_tests.runs.stop_signals import stop_on_signals
from rn50_model.packages import compile_problem
from tools.cli import SUITE_ROOT, OneLineParser
from tools.command import verb_command
from tools.worker_runs import add_window_options, require_cuda, worker_run

# Forward 4.09 GMAC = 8.18 GFLOP per 224 px image; backward is about twice the forward.
TRAINING_GFLOP_PER_IMAGE = 3 * 2 * 4.089184256
# The dtype a precision's convolutions and matmuls run in: its MFU is against that dtype's peak.
PEAK_DTYPE = {"fp32": "fp32", "tf32": "tf32", "amp": "fp16", "bf16": "bf16"}
PARTS = ("precisions", "optimizations", "input", "baseline")

# The card's dense matmul rate per compute dtype, measured: `python -c PEAK_PROBE [device n s]`
# prints {"fp32": TFLOP/s, "tf32": ..., "fp16": ..., "bf16": ...} as one JSON line.
PEAK_PROBE = r"""
import json, sys, time, torch
defaults = ["cuda", "8192", "1.0"]
device, n, seconds = sys.argv[1:] + defaults[len(sys.argv) - 1:]
n, seconds = int(n), float(seconds)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

def tflops(dtype):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        sync()
        done += 10
    return 2 * n ** 3 * done / (time.perf_counter() - start) / 1e12

peaks = {}
for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                          ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
    torch.backends.cuda.matmul.allow_tf32 = tf32  # the flag every torch reads, as the worker sets
    peaks[name] = tflops(dtype)
print(json.dumps(peaks))
"""


def parse_peaks(stdout: str) -> dict[str, float]:
    """The probe's last output line: TFLOP/s per compute dtype."""
    peaks = json.loads(stdout.strip().splitlines()[-1])
    missing = sorted(set(PEAK_DTYPE.values()) - set(peaks))
    if missing:
        raise ValueError(f"the matmul probe measured no {', '.join(missing)}")
    return {dtype: float(value) for dtype, value in peaks.items()}


def measure_peaks() -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", PEAK_PROBE], capture_output=True, text=True,
                          check=True)
    return parse_peaks(done.stdout)


def mfu(ips: float | None, precision: str, peaks: dict[str, float]) -> float | None:
    """Model FLOPs utilization of `ips` training images a second at 224 px, against the
    measured peak of the precision's compute dtype; None without a throughput or a peak."""
    peak = peaks.get(PEAK_DTYPE[precision])
    if not ips or not peak:
        return None
    return ips * TRAINING_GFLOP_PER_IMAGE / 1e3 / peak


def percent_or(value: float | None, otherwise: str) -> str:
    return f"{value:.1%}" if value is not None else otherwise


def suite_command(*options: str) -> list[str]:
    """`pytest perf_tests` with these options, as a GPU tool starts the suite."""
    return [sys.executable, "-m", "pytest", str(SUITE_ROOT / "perf_tests"), "-p",
            "no:cacheprovider", *options]


def baseline_options(precisions: tuple[str, ...], batches: tuple[int, ...] | None = None,
                     runs: int | None = None) -> list[str]:
    """The suite's options that record 1n1g full-profile baselines of these precisions (each at
    its profile batch where `batches` is None) from `runs` runs (None: the profile's; fewer
    are recorded with --perf-update-baselines=force, and the suite warns of it)."""
    forced = runs and runs < FULL.baseline_runs
    options = ["--perf-profile", "full", "-k", "1n1g", "--perf-precisions", ",".join(precisions),
               "--perf-update-baselines=force" if forced else "--perf-update-baselines"]
    if batches:
        options += ["--perf-batches", ",".join(map(str, batches))]
    if runs:
        options += ["--perf-runs", str(runs)]
    return options


def measure(settings: dict, runs: int) -> dict:
    records = [worker_run(settings) for _ in range(runs)]
    ok = [r["global_ips"] for r in records if r.get("outcome") == "ok"]
    failed = next((r for r in records if r.get("outcome") != "ok"), None)
    return {"settings": settings, "runs_ips": ok,
            "median_ips": statistics.median(ok) if ok else None,
            "outcome": "ok" if not failed else failed["outcome"],
            "message": failed.get("message") if failed else "",
            "throttled": any(r.get("throttled") for r in records),
            "gpu_state": next((r.get("gpu_state_during_window") for r in records
                               if r.get("gpu_state_during_window")), None)}


def table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n## {title}\n")
    print("\n".join(markdown_lines(header, [tuple(map(str, row)) for row in rows], set())))


def precision_section(args, common: dict, peaks: dict[str, float]) -> list[dict]:
    rows, results = [], []
    for precision in args.precisions:
        for batch in args.batches:
            result = measure({**common, "precision": precision, "batch_per_device": batch},
                             args.runs)
            results.append(result)
            rows.append((precision, batch, f"{result['median_ips'] or 0:.0f}",
                         PEAK_DTYPE[precision],
                         percent_or(mfu(result["median_ips"], precision, peaks),
                                    result["outcome"]),
                         "yes" if result["throttled"] else "no"))
    table("1n1g synthetic, channels_last", ("precision", "batch", "img/s", "peak dtype", "MFU",
                                            "throttled"), rows)
    return results


OPTIMIZATIONS = {
    "default (channels_last, cudnn.benchmark, fused SGD)": {},
    "contiguous": {"memory_format": "contiguous"},
    "cudnn.benchmark off": {"cudnn_benchmark": False},
    "foreach SGD": {"optimizer_impl": "foreach"},
    "for-loop SGD": {"optimizer_impl": "for-loop"},
    "torch.compile": {"compile": True},
    "CUDA graphs": {"cuda_graphs": True},
    "torch.compile + CUDA graphs": {"compile": True, "cuda_graphs": True},
    "amp, dynamic loss scale": {"precision": "amp"},
    "amp, static loss scale": {"precision": "amp", "loss_scale": "static"},
}


def measure_unless_uncompilable(settings: dict, runs: int) -> dict:
    """measure(), or a skipped result where torch.compile cannot build its kernels here."""
    problem = compile_problem("cuda") if settings.get("compile") else None
    if problem is None:
        return measure(settings, runs)
    print(f"skipped: {problem}", flush=True)
    return {"settings": settings, "runs_ips": [], "median_ips": None, "outcome": "skipped",
            "message": problem, "throttled": False, "gpu_state": None}


def optimization_section(args, common: dict, peaks: dict[str, float]) -> dict:
    default = {**common, "precision": "bf16", "batch_per_device": 256}
    results = {name: measure_unless_uncompilable({**default, **change}, args.runs)
               for name, change in OPTIMIZATIONS.items()}
    base = results[next(iter(OPTIMIZATIONS))]["median_ips"]
    rows = []
    for name, result in results.items():
        ips = result["median_ips"]
        rows.append((name, f"{ips or 0:.0f}",
                     f"{ips / base:.3f}" if ips and base else result["outcome"],
                     percent_or(mfu(ips, result["settings"]["precision"], peaks), "-")))
    table("bf16 b256 variants, ratio against the default", ("variant", "img/s", "ratio", "MFU"),
          rows)
    return results


def input_section(args, common: dict) -> dict:
    results, rows = {}, []
    for backend in ("synthetic", "torch"):
        result = measure({**common, "precision": "bf16", "batch_per_device": 256,
                          "data_backend": backend, "data_workers": args.data_workers}, args.runs)
        results[backend] = result
        rows.append((backend, f"{result['median_ips'] or 0:.0f}", result["outcome"],
                     result["message"][:80]))
    table(f"input pipeline, bf16 b256, {args.data_workers} loader workers",
          ("backend", "img/s", "outcome", "message"), rows)
    return results


def parse_arguments(argv: list[str] | None):
    parser = OneLineParser(prog=verb_command("gpu-bench"), description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=whole_number(1), default=3,
                        help="runs per measurement, their median reported (default 3)")
    add_window_options(parser, warmup=20, iters=100, each=" a run")
    parser.add_argument("--batches", type=batch_list, default=(128, 256),
                        help="batches per device at 1n1g (default 128,256)")
    parser.add_argument("--precisions", type=precision_list,
                        default=("fp32", "tf32", "amp", "bf16"),
                        help="precisions at 1n1g (default fp32,tf32,amp,bf16)")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: "
                        f"{','.join(PARTS)}")
    parser.add_argument("--record-baseline", action="store_true",
                        help="also run the suite's 1n1g full-profile cases with "
                             "--perf-update-baselines")
    parser.add_argument("--data-workers", type=whole_number(0),
                        default=len(os.sched_getaffinity(0)),
                        help="DataLoader workers for the torch backend (default: this host's "
                             "cores)")
    parser.add_argument("--output", type=Path, default=Path("gpu_bench.json"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    require_cuda("rn50-perf gpu-bench")
    stop_on_signals()  # SIGTERM ends the running worker's processes, as Ctrl-C does
    skip = set(filter(None, args.skip.split(",")))
    common = {"image_size": 224, "warmup_iters": args.warmup, "timed_iters": args.iters,
              "device": "cuda", "data_backend": "synthetic"}
    report: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    peaks: dict[str, float] = {}
    if {"precisions", "optimizations"} - skip:  # the parts that report MFU
        peaks = report["matmul_tflops"] = measure_peaks()
        print("measured matmul: " + ", ".join(f"{dtype} {value:.0f}"
                                              for dtype, value in peaks.items()) + " TFLOP/s")
    if "precisions" not in skip:
        report["precisions"] = precision_section(args, common, peaks)
    if "optimizations" not in skip:
        report["optimizations"] = optimization_section(args, common, peaks)
    if "input" not in skip:
        report["input"] = input_section(args, common)
    if args.record_baseline and "baseline" not in skip:
        command = suite_command(*baseline_options(args.precisions, args.batches))
        print("\n" + " ".join(command), flush=True)
        # From the user's folder: the baseline is their project's (in a checkout, its root),
        # never an installed package's folder.
        subprocess.run(command, check=False)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.output}")
    return 0
