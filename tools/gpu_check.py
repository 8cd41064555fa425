"""Every CUDA path of the workload, a few iterations each, through the real worker and torchrun:
the first thing to run on a new GPU host. One table (path, outcome, img/s, note); the exit
status is non-zero where any path fails. A path whose library or devices are absent here is
`skipped` with the reason; on a host without CUDA the tool says so in one line.

    python3 tools/gpu_check.py                      # every path
    python3 tools/gpu_check.py --only amp,cuda-graphs --iters 20 --output gpu_check.json

The precision paths train with the fused SGD (the default on CUDA); foreach and for-loop SGD
have paths of their own. A path passes when its run finishes with a finite loss (or, for the out-of-memory paths, when
it ends as `oom`, the outcome the suite reports); the NVML path when every rank's GPU state
carries its clocks.
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perf_tests.options import whole_number  # noqa: E402
from tools.cli import OneLineParser  # noqa: E402
from tools.worker_runs import require_cuda, worker_run  # noqa: E402

PASSED, FAILED, SKIPPED = "pass", "FAIL", "skipped"


@dataclass(frozen=True)
class CudaPath:
    """One CUDA path: the TrainConfig fields it changes, and what it needs to run."""
    name: str
    changes: dict = field(default_factory=dict)
    devices: int = 1
    needs: str | None = None          # "dali", "torchvision" or "nvml"
    expect: str = "ok"                # "oom" for the out-of-memory paths
    fault: str | None = None          # RN50_FAULT for the run


@dataclass(frozen=True)
class Host:
    """What this host offers the paths."""
    devices: int
    libraries: dict[str, str | None]  # library -> None where it imports, else why not


def paths(devices: int) -> list[CudaPath]:
    """Every path, in the order the table shows them; multi-GPU ones use up to 8 devices."""
    several = max(2, min(devices, 8))
    return [
        CudaPath("fp32", {"precision": "fp32"}),
        CudaPath("tf32", {"precision": "tf32"}),
        CudaPath("amp", {"precision": "amp"}),
        CudaPath("amp-static-loss-scale", {"precision": "amp", "loss_scale": "static"}),
        CudaPath("bf16", {"precision": "bf16"}),
        CudaPath("contiguous", {"precision": "amp", "memory_format": "contiguous"}),
        CudaPath("sgd-foreach", {"precision": "amp", "optimizer_impl": "foreach"}),
        CudaPath("sgd-for-loop", {"precision": "amp", "optimizer_impl": "for-loop"}),
        CudaPath("torch-compile", {"precision": "bf16", "compile": True}),
        CudaPath("cuda-graphs", {"precision": "bf16", "cuda_graphs": True}),
        CudaPath("cuda-graphs-amp", {"precision": "amp", "cuda_graphs": True}),
        CudaPath("cuda-graphs-ddp", {"precision": "bf16", "cuda_graphs": True}, devices=2),
        CudaPath(f"nccl-{several}gpu", {"precision": "amp"}, devices=several),
        CudaPath("dali-gpu", {"precision": "amp", "data_backend": "dali-gpu"}, needs="dali"),
        CudaPath("dali-cpu", {"precision": "amp", "data_backend": "dali-cpu"}, needs="dali"),
        CudaPath("torch-loader", {"precision": "amp", "data_backend": "torch"},
              needs="torchvision"),
        CudaPath("nvml-state", {"precision": "amp"}, needs="nvml"),
        CudaPath("oom-memory-limit", {"precision": "amp", "batch_per_device": 256,
                                   "memory_limit_bytes": 2**30}, expect="oom"),
        CudaPath("oom-injected", {"precision": "amp"}, expect="oom", fault="oom@rank=0,iter=1"),
    ]


def skip_reason(path: CudaPath, host: Host) -> str | None:
    if path.devices > host.devices:
        return f"needs {path.devices} CUDA devices, found {host.devices}"
    if path.needs:
        return host.libraries.get(path.needs)
    return None


def judge(path: CudaPath, record: dict) -> tuple[str, str]:
    """(outcome, note) of one path's run record."""
    outcome = record.get("outcome")
    if path.expect == "oom":
        if outcome == "oom":
            return PASSED, f"oom as expected: {record.get('message', '')}"[:100]
        if outcome == "ok":
            return FAILED, "expected out of memory, but the run finished"
        return FAILED, f"expected oom, got {outcome}: {record.get('message', '')}"
    if outcome != "ok":
        return FAILED, f"{outcome}: {record.get('message', 'no message')}"
    losses = [record.get("first_loss"), record.get("last_loss")]
    if not all(isinstance(loss, (int, float)) and math.isfinite(loss) for loss in losses):
        return FAILED, f"loss not finite: {losses[0]} -> {losses[1]}"
    if path.needs == "nvml":
        states = record.get("gpu_state_per_rank") or []
        clocks = [state.get("sm_clock_mhz") for state in states]
        if not states or not all(isinstance(clock, (int, float)) for clock in clocks):
            return FAILED, f"no SM clock in the GPU state of every rank: {states}"
        reasons = sorted({reason for state in states for reason in state.get("throttle_reasons", [])})
        return PASSED, (f"SM clock {', '.join(f'{clock:.0f}' for clock in clocks)} MHz; "
                        f"reasons: {', '.join(reasons) or 'none'}")
    note = f"loss {losses[0]:.3f} -> {losses[1]:.3f}"
    if record.get("throttled"):
        note += f"; throttled on ranks {record.get('throttled_ranks')}"
    return PASSED, note


def library_problems() -> dict[str, str | None]:
    """For each optional library, None where it imports here, else why the paths skip."""
    problems: dict[str, str | None] = {}
    problems["dali"] = (None if importlib.util.find_spec("nvidia") and
                        importlib.util.find_spec("nvidia.dali") else
                        "NVIDIA DALI is not installed (pip install nvidia-dali-cuda120)")
    try:
        import torchvision  # noqa: F401
        problems["torchvision"] = None
    except Exception as error:  # a CUDA torchvision on CPU torch fails with RuntimeError too
        problems["torchvision"] = f"torchvision does not import ({str(error).splitlines()[0]})"
    problems["nvml"] = (None if importlib.util.find_spec("pynvml") else
                        "nvidia-ml-py is not installed (pip install nvidia-ml-py)")
    return problems


def print_table(rows: list[dict]) -> None:
    width = max(len(row["path"]) for row in rows)
    print(f"| {'path':<{width}} | outcome | img/s | note |")
    print(f"|{'-' * (width + 2)}|---|---:|---|")
    for row in rows:
        ips = f"{row['ips']:.0f}" if row.get("ips") else "-"
        print(f"| {row['path']:<{width}} | {row['outcome']} | {ips} | {row['note']} |",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="gpu_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=whole_number(1), default=64,
                        help="batch per device (default 64; the oom paths use their own)")
    parser.add_argument("--image-size", type=whole_number(32), default=224,
                        help="image side in pixels (default 224)")
    parser.add_argument("--warmup", type=whole_number(0), default=3,
                        help="warm-up iterations a run (default 3; CUDA graphs with DDP run "
                             "at least 11 eager steps whatever this says)")
    parser.add_argument("--iters", type=whole_number(1), default=5,
                        help="timed iterations a run (default 5)")
    parser.add_argument("--only", default="",
                        help="comma list of path names, or parts of them (default: every path)")
    parser.add_argument("--timeout", type=whole_number(1), default=900,
                        help="seconds one path may take (default 900)")
    parser.add_argument("--output", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    devices = require_cuda("gpu_check.py")
    host = Host(devices, library_problems())
    wanted = [part.strip() for part in args.only.split(",") if part.strip()]
    selected = [path for path in paths(devices)
                if not wanted or any(part in path.name for part in wanted)]
    if not selected:
        parser.error(f"--only {args.only!r} matches no path; paths are "
                     f"{', '.join(path.name for path in paths(devices))}")
    common = {"device": "cuda", "data_backend": "synthetic", "image_size": args.image_size,
              "batch_per_device": args.batch, "warmup_iters": args.warmup,
              "timed_iters": args.iters}
    print(f"{devices} CUDA device(s); {len(selected)} paths, {args.warmup} warm-up + "
          f"{args.iters} timed iterations each, batch {args.batch} at {args.image_size} px\n",
          flush=True)
    rows = []
    for path in selected:
        reason = skip_reason(path, host)
        if reason:
            rows.append({"path": path.name, "outcome": SKIPPED, "ips": None, "note": reason})
            continue
        record = worker_run({**common, **path.changes}, nproc=path.devices,
                            extra_env={"RN50_FAULT": path.fault} if path.fault else None,
                            timeout=args.timeout)
        outcome, note = judge(path, record)
        rows.append({"path": path.name, "outcome": outcome, "ips": record.get("global_ips"),
                     "note": note, "record": record})
        print(f"{path.name}: {outcome} {note}", file=sys.stderr, flush=True)
    print_table(rows)
    failed = [row["path"] for row in rows if row["outcome"] == FAILED]
    if args.output:
        args.output.write_text(json.dumps(rows, indent=2, default=str) + "\n")
    print(f"\n{len(rows) - len(failed)} of {len(rows)} paths passed or skipped"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
