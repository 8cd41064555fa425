"""An operator profile of the training step: a few iterations under torch.profiler, summarized.

A profiled run is a run of its own (`TrainConfig.profile_iters` > 0, or `--profile-iters N` on
the worker): W warm-up iterations, then N iterations under torch.profiler (CPU activity, and on
CUDA the CUDA activity too). It never shares a window with a timed run, so measured throughput
is untouched. Rank 0 profiles and writes the Chrome trace (`trace.json`, for Perfetto or
chrome://tracing) and the summary (`op_profile.json`) into the run folder; the other ranks run
the same steps unprofiled, so collectives still meet.

The summary is per iteration: each operator's self time (host, and device on CUDA), the CUDA
kernels' device time, time per kernel family (convolution, GEMM, normalization, communication,
optimizer, elementwise, other), host time against device time, and the share of communication.

    torchrun --standalone --nproc-per-node 1 -m rn50_model.worker --run-dir prof \\
        --precision fp32 --device cpu --batch-per-device 8 --image-size 64 --profile-iters 3
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from .startup import barrier, record_header

SUMMARY_SCHEMA_VERSION = 1
SUMMARY_FILE = "op_profile.json"
TRACE_FILE = "trace.json"
# Enough operators that a change among the small ones shows, few enough for a baseline entry.
KEPT_OPERATORS = 60
# First match wins. cuDNN's batch-norm kernels (`cudnn::bn_fw_tr_1C11_kernel_NCHW`,
# `cudnn::batchnorm_fwtr_nhwc_semiPersist`) and `aten::cudnn_batch_norm` carry "cudnn", so
# normalization is tried before convolution; cuDNN and oneDNN convolution kernels often contain
# "gemm" (implicit GEMM), so convolution is tried before GEMM.
FAMILIES = (
    ("communication", re.compile(r"nccl|gloo|all_?reduce|allgather|all_gather|broadcast|"
                                 r"reduce_scatter|c10d::|record_param_comms", re.IGNORECASE)),
    ("normalization", re.compile(r"batch_?norm|bn_fw|bn_bw", re.IGNORECASE)),
    ("convolution", re.compile(r"conv|cudnn|winograd|dgrad|wgrad|fprop|implicit_?gemm|"
                               r"mkldnn_conv", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|\bmm\b|aten::mm|addmm|matmul|aten::linear|cutlass|cublas",
                        re.IGNORECASE)),
    ("optimizer", re.compile(r"optimizer|sgd|_foreach_|multi_tensor", re.IGNORECASE)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|aten::(add|mul|sub|div|relu|"
                               r"threshold|copy|fill|clamp|where|neg|exp|log|sqrt|zero)",
                               re.IGNORECASE)),
)
# Not the step's host work: the profiler's own wrappers, and the device-wide synchronize that
# closes the window (ours, and the one torch's profiler issues as it stops), whose self time is
# the host waiting for the queued kernels: counted, host time would read as the whole step.
SKIPPED_EVENTS = re.compile(r"^ProfilerStep#|^\[memory\]$|^(cuda|hip)DeviceSynchronize$")


@dataclass(frozen=True)
class EventTotals:
    """One name's totals over the profiled iterations, in microseconds (torch's unit)."""
    name: str
    calls: int
    self_host_us: float
    self_device_us: float
    is_kernel: bool  # a device kernel (or memcpy/memset), not a host-side operator


def family_of(name: str) -> str:
    return next((family for family, pattern in FAMILIES if pattern.search(name)), "other")


def summarize(events: list[EventTotals], iterations: int, wall_s: float, device_type: str,
              world_size: int = 1, keep: int = KEPT_OPERATORS) -> dict:
    """The per-iteration summary of a profile (what a baseline entry stores as `op_profile`).

    Operators are the host-side events; their `ms` is the device self time on CUDA (the
    kernels they launched) and the host self time on CPU, where everything runs on the host.
    Families sum kernels on CUDA and operators on CPU, so no time is counted twice.
    """
    if iterations < 1:
        raise ValueError(f"a profile needs at least one iteration, got {iterations}")
    on_device = device_type == "cuda"
    def ms(total_us: float) -> float:
        """Microseconds over all profiled iterations -> milliseconds per iteration."""
        return round(total_us / 1000.0 / iterations, 4)

    operators = [event for event in events
                 if not event.is_kernel and not SKIPPED_EVENTS.search(event.name)]
    kernels = [event for event in events if event.is_kernel]
    main_us = (lambda event: event.self_device_us) if on_device else (
        lambda event: event.self_host_us)
    operator_rows = {
        event.name: {"ms": ms(main_us(event)), "host_ms": ms(event.self_host_us),
                     **({"device_ms": ms(event.self_device_us)} if on_device else {}),
                     "calls": round(event.calls / iterations, 2)}
        for event in sorted(operators, key=lambda event: (-main_us(event), -event.self_host_us,
                                                          event.name))[:keep]}
    counted = kernels if on_device else operators
    families: dict[str, float] = {}
    for event in counted:
        family = family_of(event.name)
        families[family] = families.get(family, 0.0) + main_us(event)
    host_us = sum(event.self_host_us for event in operators)
    device_us = sum(event.self_device_us for event in kernels) if on_device else None
    total_us = sum(families.values())
    communication = families.get("communication", 0.0)
    summary = {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "device_type": device_type,
        "iterations": iterations,
        "world_size": world_size,
        "step_ms": round(wall_s * 1000.0 / iterations, 4),
        "host_ms": ms(host_us),
        "device_ms": ms(device_us) if device_us is not None else None,
        "operators": operator_rows,
        "families": {family: ms(value) for family, value in
                     sorted(families.items(), key=lambda item: -item[1])},
        "communication_share": (round(communication / total_us, 4)
                                if world_size > 1 and total_us else None),
    }
    if on_device:
        summary["kernels"] = {
            event.name: {"ms": ms(event.self_device_us),
                         "calls": round(event.calls / iterations, 2)}
            for event in sorted(kernels, key=lambda event: -event.self_device_us)[:keep]}
    return summary


def summary_problem(summary) -> str | None:
    """What is wrong with a stored summary (a baseline's `op_profile`), or None: the fields the
    comparison reads must be there and be numbers."""
    if not isinstance(summary, dict):
        return "is not an object"
    if summary.get("schema_version") != SUMMARY_SCHEMA_VERSION:
        return (f"has schema_version {summary.get('schema_version')!r}, this suite reads "
                f"{SUMMARY_SCHEMA_VERSION}")
    operators = summary.get("operators")
    if not isinstance(operators, dict):
        return "has no 'operators' object"
    for name, row in operators.items():
        if not isinstance(row, dict) or not _number(row.get("ms")):
            return f"has operator {name!r} without a number 'ms'"
    for name in ("step_ms", "host_ms"):
        if not _number(summary.get(name)):
            return f"has no number {name!r}"
    return None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def events_of(profiler) -> list[EventTotals]:
    """Totals per name from a finished torch.profiler.profile."""
    from torch.autograd import DeviceType
    events = []
    for average in profiler.key_averages():
        device_us = getattr(average, "self_device_time_total", None)
        if device_us is None:  # torch before 2.4
            device_us = getattr(average, "self_cuda_time_total", 0.0)
        events.append(EventTotals(
            name=average.key, calls=int(average.count),
            self_host_us=float(average.self_cpu_time_total), self_device_us=float(device_us),
            is_kernel=getattr(average, "device_type", DeviceType.CPU) != DeviceType.CPU))
    return events


def profile_steps(train_step, iterations: int, first_iteration: int, device,
                  synchronize, world_size: int, trace_path: Path | None):
    """Run `iterations` training steps under torch.profiler; return the summary (and write the
    Chrome trace to `trace_path` where given). Without `trace_path` the steps run unprofiled:
    the other ranks of a profiled job."""
    from torch.profiler import ProfilerActivity, profile

    steps = range(first_iteration, first_iteration + iterations)
    if trace_path is None:
        for iteration in steps:
            train_step(iteration)
        synchronize()
        return None
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiler:
        start = time.perf_counter()
        for iteration in steps:
            train_step(iteration)
        # The step time needs the kernels finished. Outside the profiler it would not help:
        # torch's profiler synchronizes the device as it stops, still recording, and a clock
        # read after it counts its teardown. So the wait is left out of the summary by name.
        synchronize()
        wall_s = time.perf_counter() - start
    profiler.export_chrome_trace(str(trace_path))
    return summarize(events_of(profiler), iterations, wall_s, device.type, world_size)


def profiled_run(config, placement, device, train_step, synchronize, run_dir: Path) -> dict:
    """The record of a profiled run, after its warm-up: rank 0's operator profile and its trace
    file; its img/s is the profiled iterations' (the profiler's overhead included), never a
    measurement."""
    # Here, not at the top: environment imports torch, and the suite imports this module for
    # summary_problem and the file names without it.
    from .environment import collect_environment

    barrier()
    trace = run_dir / TRACE_FILE if placement.rank == 0 else None
    start = time.perf_counter()
    summary = profile_steps(train_step, config.profile_iters, config.warmup_iters, device,
                            synchronize, placement.world_size, trace)
    elapsed = time.perf_counter() - start
    return {
        **record_header(config, placement, device, kind="op_profile"),
        "global_ips": placement.world_size * config.batch_per_device * config.profile_iters
        / elapsed,
        "op_profile": summary,
        "trace_file": TRACE_FILE,
        "environment": collect_environment(device),
    }
