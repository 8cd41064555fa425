"""What differs between a result's run and its baseline's (or a candidate's and the
reference's): the container image, the versions and facts of the environment, the variables that
shape a run (perf_tests/run_variables.py) and the workload settings, each as the one clause that a
verdict's line, report.md and the tools name.
"""
from __future__ import annotations

from .run_variables import VARIABLES, variables_diff

# Environment facts worth naming when a result differs from its baseline, most telling first.
ENVIRONMENT_KEYS = ("device", "driver", "cuda", "cudnn", "nccl", "torch", "dali", "python",
                    "container", "os", "cpu", "cpu_count", "host", "commit")
# The container image a side ran in (perf_tests/containers/): its name, runtime and digest.
IMAGE, NO_IMAGE = "image", "none"
NO_CHANGE = "no change in"   # how an environment diff that names nothing begins
# Workload settings that leave a baseline comparable (the same work, run differently) but are
# worth naming when a result differs from it.
WORKLOAD_SETTINGS = ("threads", "memory_format", "launcher", "compile", "cuda_graphs")


def environment_changes(baseline: dict, current: dict) -> list[str]:
    """`image a.sif (...) -> b.sif (...)`, `driver 535.104 -> 550.54`, ...,
    `DNNL_MAX_CPU_ISA unset -> SSE41`: the container image first (`none` for a side that ran
    on the host as it is), then the versions and facts, then the variables that shape a run
    (perf_tests/run_variables.py): what changed inside an image follows its name."""
    before, after = baseline.get(IMAGE, NO_IMAGE), current.get(IMAGE, NO_IMAGE)
    image = [f"{IMAGE} {before} -> {after}"] if before != after else []
    return image + [f"{key} {baseline[key]} -> {current[key]}" for key in ENVIRONMENT_KEYS
                    if key in baseline and key in current
                    and str(baseline[key]) != str(current[key])] + variables_diff(baseline,
                                                                                   current)


def environment_diff(baseline: dict, current: dict) -> str:
    """`driver 535.104 -> 550.54, nccl 2.18.3 -> 2.19.3`: what changed since the baseline, or
    `no change in device, ..., variables`: what was compared."""
    if not baseline:
        return "the baseline records no environment"
    changes = environment_changes(baseline, current)
    compared = ([IMAGE] if IMAGE in baseline and IMAGE in current else []) + [
        key for key in ENVIRONMENT_KEYS[:6] if key in baseline]
    if VARIABLES in baseline and VARIABLES in current:
        compared.append(VARIABLES)
    return ", ".join(changes) if changes else f"{NO_CHANGE} " + ", ".join(compared)


def settings_diff(baseline: dict, current: dict,
                  names: tuple[str, ...] = WORKLOAD_SETTINGS) -> str:
    """`threads 2 -> 1`: the settings among `names` (the workload's) changed since the
    baseline, '' where none did (or the baseline does not record them). Entries recorded before
    settings were stored as the workers resolved them say `auto` (memory format): that names no
    setting, so no change."""
    return ", ".join(f"{key} {baseline[key]} -> {current[key]}" for key in names
                     if baseline.get(key) not in (None, "auto") and key in current
                     and str(baseline[key]) != str(current[key]))


def explained(message: str, environment: str | None, settings: str | None) -> str:
    """A verdict's line with what changed since its baseline: the failure line pytest shows and
    report.md keeps."""
    if environment:
        message += f"; environment: {environment}"
    if settings:
        message += f"; settings: {settings}"
    return message
