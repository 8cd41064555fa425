"""The CUDA paths of the workload that `tools/gpu/check.py` runs: what each changes and needs,
when this host skips it, how its run is judged, and the table of outcomes. `tools/gpu/measure.py`
reads the same table back."""
from __future__ import annotations

import importlib
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.text import markdown_lines
from perf_tests.runs.launch import Stack
from rn50_model.packages import compile_problem, dali_distribution
from tools.gpu.image_path import IMAGE_READY, image_problem, own_root_stack
from tools.worker_runs import worker_run

PASSED, FAILED, SKIPPED = "pass", "FAIL", "skipped"
# A path's run: a few iterations at a small batch (the command line can change them).
PATH_BATCH, PATH_WARMUP, PATH_ITERS = 64, 3, 5
# A path's training step diverges where any step's loss is not finite or above this many times
# the first step's. Measured on CPU (docs/gpu.md: batch 64, the recipe's LR 0.064, no warm-up,
# one synthetic batch, 10 steps): a healthy run climbs for real, to 1.65 times its start at
# 224 px (7.08 -> 11.66; 8.26 at step 8, where the H200's fp32 path ended at 8.17) and to 1.8
# times at 64 px, and the H200's paths ended at up to 2.4 times (torch-loader 7.00 -> 16.67);
# at 10 times the recipe's LR a run peaks at 2.6 times, no different in so few steps; at 100
# times it reaches 21 times its start at step 2 (31 at step 4) and at 1000 times 94 times. The
# peak, not the last loss: the run at 100 times fell back to 1.1 times at step 5. Ten times
# the start sits four times above every healthy run and half the first step that diverged.
LOSS_RISE_LIMIT = 10.0
IMAGE = "image"   # the need of the path whose workers run inside an image (tools/gpu/image_path.py)


@dataclass(frozen=True)
class CudaPath:
    """One CUDA path: the TrainConfig fields it changes, and what it needs to run."""
    name: str
    changes: dict = field(default_factory=dict)
    devices: int = 1
    needs: str | None = None          # "dali", "torchvision", "nvml", "compiler" or IMAGE
    expect: str = "ok"                # "oom" for the out-of-memory paths
    fault: str | None = None          # RN50_FAULT for the run


@dataclass(frozen=True)
class Host:
    """What this host offers the paths."""
    devices: int
    libraries: dict[str, str | None]  # library -> None where it imports, else why not
    no_cuda: str = ""                 # where `devices` is 0: why torch sees none


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
        CudaPath("torch-compile", {"precision": "bf16", "compile": True}, needs="compiler"),
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
        CudaPath("amp-in-image", {"precision": "amp"}, needs=IMAGE),
    ]


def skip_reason(path: CudaPath, host: Host) -> str | None:
    if path.devices > host.devices and host.no_cuda:
        # The image is checked without a GPU too: whether bwrap would start it on a GPU host.
        image = f"; {host.libraries[IMAGE] or IMAGE_READY}" if path.needs == IMAGE \
            and IMAGE in host.libraries else ""
        return f"no CUDA device: {host.no_cuda}{image}"
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
    # Records written before every step's loss was kept have the first and the last only.
    losses = record.get("losses") or [record.get("first_loss"), record.get("last_loss")]
    problem = loss_problem(losses)
    if problem:
        return FAILED, problem
    if path.needs == "nvml":
        states = record.get("gpu_state_per_rank") or []
        clocks = [state.get("sm_clock_mhz") for state in states]
        if not states or not all(isinstance(clock, (int, float)) for clock in clocks):
            return FAILED, f"no SM clock in the GPU state of every rank: {states}"
        reasons = sorted({reason for state in states
                          for reason in state.get("throttle_reasons", [])})
        return PASSED, (f"SM clock {', '.join(f'{clock:.0f}' for clock in clocks)} MHz; "
                        f"reasons: {', '.join(reasons) or 'none'}; {energy_text(record)}")
    note = f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    if record.get("throttled"):
        note += f"; throttled on ranks {record.get('throttled_ranks')}"
    return PASSED, note


def loss_problem(losses: list) -> str | None:
    """Why a run's losses, one a step, say its training step diverges; None where they do not.
    A finite last loss is not enough: a step can overflow and recover (amp skips the step), or
    climb far and fall back within a few steps."""
    if not losses:
        return "no loss recorded"
    for step, loss in enumerate(losses, 1):
        if not isinstance(loss, (int, float)) or not math.isfinite(loss):
            return f"loss not finite at step {step} of {len(losses)}: {loss}"
    first = losses[0]
    peak_step, peak = max(enumerate(losses, 1), key=lambda item: item[1])
    if peak > LOSS_RISE_LIMIT * first:
        return (f"loss diverged: {first:.3f} -> {peak:.3f} at step {peak_step} of "
                f"{len(losses)}, above {LOSS_RISE_LIMIT:g} times its start")
    return None


def energy_text(record: dict) -> str:
    """What NVML's energy counter gave the run (the figure the memory and energy gate stores), or
    why it gave none: the first reading of it on a GPU is this path's note."""
    joules = record.get("joules_per_image")
    if isinstance(joules, (int, float)):
        return f"{joules:.3g} J/image ({record.get('energy_joules', 0):.3g} J)"
    return f"no energy: {record.get('energy_note') or 'not recorded'}"


def import_problem(module: str) -> str | None:
    """None where `module` imports here, else the first line of why not."""
    try:
        importlib.import_module(module)
    except Exception as error:  # a CUDA torchvision on CPU torch fails with RuntimeError too
        return (str(error).strip().splitlines() or [type(error).__name__])[0]
    return None


def host_problems(selected: list[CudaPath], devices: int) -> dict[str, str | None]:
    """For each need of the `selected` paths, None where this host meets it, else why it skips:
    the libraries where there is a CUDA device (without one every path skips for that), the
    image wherever its path is selected (bwrap over this root starts or not, GPU or none)."""
    problems = library_problems() if devices else {}
    if any(path.needs == IMAGE for path in selected):
        problems[IMAGE] = image_problem()
    return problems


def library_problems() -> dict[str, str | None]:
    """For each optional library a path needs, None where this host has it, else why it skips."""
    import torch

    problems = {"dali": import_problem("nvidia.dali"),
                "torchvision": import_problem("torchvision"), "nvml": import_problem("pynvml")}
    if problems["dali"]:
        problems["dali"] = ("NVIDIA DALI is not installed "
                            f"(pip install {dali_distribution(torch.version.cuda)})")
    if problems["torchvision"]:
        problems["torchvision"] = f"torchvision does not import ({problems['torchvision']})"
    if problems["nvml"]:
        problems["nvml"] = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    problems["compiler"] = compile_problem("cuda")
    return problems


def path_table(rows: list[dict]) -> list[str]:
    """The table as Markdown lines: path, outcome, img/s, note."""
    cells = [(row["path"], row["outcome"], f"{row['ips']:.0f}" if row.get("ips") else "-",
              row["note"]) for row in rows]
    return markdown_lines(("path", "outcome", "img/s", "note"), cells, {2})


def check_paths(selected: list[CudaPath], host: Host, common: dict, timeout: float,
                output: Path | None) -> list[dict]:
    """One row per path, in order; `output` is rewritten after each, so a stopped check keeps
    the rows it has."""
    rows = []
    for path in selected:
        reason = skip_reason(path, host)
        if reason:
            rows.append({"path": path.name, "outcome": SKIPPED, "ips": None, "note": reason})
        else:
            record = worker_run({**common, **path.changes}, nproc=path.devices,
                                extra_env={"RN50_FAULT": path.fault} if path.fault else None,
                                timeout=timeout,
                                stack=own_root_stack() if path.needs == IMAGE else Stack())
            outcome, note = judge(path, record)
            rows.append({"path": path.name, "outcome": outcome, "ips": record.get("global_ips"),
                         "note": note, "record": record})
        print(f"{path.name}: {rows[-1]['outcome']} {rows[-1]['note']}", file=sys.stderr,
              flush=True)
        if output:
            output.write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return rows


